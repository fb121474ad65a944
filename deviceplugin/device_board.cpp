#include "deviceplugin/device_board.h"

namespace nvshare::deviceplugin {

bool DeviceBoard::publish(std::vector<GpuHealth> gpus)
{
    {
        std::lock_guard lock(mutex_);
        if (snapshot_.generation > 0 && gpus == snapshot_.gpus)
            return false;
        snapshot_.gpus = std::move(gpus);
        snapshot_.generation++;
    }
    changed_.notify_all();
    return true;
}

DeviceBoard::Snapshot DeviceBoard::current() const
{
    std::lock_guard lock(mutex_);
    return snapshot_;
}

DeviceBoard::Snapshot DeviceBoard::wait_change(uint64_t seen, const std::atomic<bool>& stop,
                                               std::chrono::milliseconds timeout) const
{
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return snapshot_.generation != seen || stop; });
    return snapshot_;
}

void DeviceBoard::wake_all()
{
    // Under the lock, so a waiter between its check and its sleep still wakes.
    {
        std::lock_guard lock(mutex_);
    }
    changed_.notify_all();
}

}  // namespace nvshare::deviceplugin
