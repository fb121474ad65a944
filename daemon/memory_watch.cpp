#include "daemon/memory_watch.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "daemon/log.h"

namespace nvshare::daemon {

MemoryWatch::MemoryWatch(Reader reader, Duration interval)
    : reader_(std::move(reader)), interval_(interval)
{
}

MemoryWatch::~MemoryWatch()
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
        thread_.join();
    sd_event_source_disable_unref(source_);
    if (ready_fd_ >= 0)
        close(ready_fd_);
}

bool MemoryWatch::start(sd_event* event, std::function<void(Readings)> deliver)
{
    deliver_ = std::move(deliver);
    ready_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ready_fd_ < 0) {
        NVS_ERROR("cannot make the memory watch's eventfd: %s", strerror(errno));
        return false;
    }
    const int r = sd_event_add_io(event, &source_, ready_fd_, EPOLLIN, on_ready, this);
    if (r < 0) {
        NVS_ERROR("cannot watch the memory watch's eventfd: %s", strerror(-r));
        return false;
    }
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
        NVS_ERROR("cannot start the memory watch: %s", e.what());
        return false;
    }
    return true;
}

void MemoryWatch::watch(std::set<std::string> uuids)
{
    bool wake = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        wake = uuids_.empty() && !uuids.empty();
        uuids_ = std::move(uuids);
    }
    if (wake)
        wake_.notify_all();
}

void MemoryWatch::run()
{
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !uuids_.empty(); });
        if (stop_)
            return;
        const std::set<std::string> uuids = uuids_;
        lock.unlock();
        Readings readings;
        for (const std::string& uuid : uuids)
            readings[uuid] = reader_(uuid);
        lock.lock();
        pending_ = std::move(readings);
        const uint64_t one = 1;
        (void)!write(ready_fd_, &one, sizeof one);  // fails only when already signalled
        if (wake_.wait_for(lock, interval_, [&] { return stop_; }))
            return;
    }
}

int MemoryWatch::on_ready(sd_event_source*, int fd, uint32_t, void* self)
{
    auto* w = static_cast<MemoryWatch*>(self);
    uint64_t count = 0;
    (void)!read(fd, &count, sizeof count);
    std::optional<Readings> readings;
    {
        std::lock_guard<std::mutex> lock(w->mutex_);
        readings.swap(w->pending_);
    }
    if (readings)
        w->deliver_(std::move(*readings));
    return 0;
}

}  // namespace nvshare::daemon
