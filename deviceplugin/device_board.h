// The GPU list that ListAndWatch streams: written by the poll loop, read by
// each stream, which wakes when it changes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "deviceplugin/gpu_inventory.h"

namespace nvshare::deviceplugin {

class DeviceBoard {
public:
    struct Snapshot {
        uint64_t generation = 0;  // grows with every change
        std::vector<GpuHealth> gpus;
    };
    // Stores `gpus`; true (and wakes the streams) when they differ from before.
    bool publish(std::vector<GpuHealth> gpus);
    Snapshot current() const;
    // The snapshot once its generation is past `seen`, `stop` is set or
    // `timeout` has passed, whichever comes first.
    Snapshot wait_change(uint64_t seen, const std::atomic<bool>& stop,
                         std::chrono::milliseconds timeout) const;
    // Wakes every waiter to look at its `stop` again.
    void wake_all();

private:
    mutable std::mutex mutex_;
    mutable std::condition_variable changed_;
    Snapshot snapshot_;
};

}  // namespace nvshare::deviceplugin
