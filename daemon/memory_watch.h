// What the host confirms of each process's memory: NVML's per-process
// counts (nvml_process_memory) for the GPUs asked for and the resident host
// memory of the processes asked for (process_anon_memory), read every
// kMemoryWatchInterval on a thread of its own and handed to the event loop
// through an eventfd. Reading asks the driver, which can take long on a GPU
// in trouble; the loop never waits for it and keeps the latest readings,
// and stopping does not wait for a reading under way either.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "daemon/host_readings.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

// How stale a confirmation may be: a process's pinned memory that grows is
// shown to others at most this much later (nvshared(8), LIMITS).
inline constexpr Duration kMemoryWatchInterval = std::chrono::seconds(1);

class MemoryWatch {
public:
    using Counts = HostReadings::Counts;
    // One GPU's counts; nullopt where the host cannot say.
    using Reader = std::function<std::optional<Counts>(const std::string& uuid)>;
    // One process's resident host memory; nullopt where the host cannot say.
    using HostReader = std::function<std::optional<uint64_t>(int32_t pid)>;
    using Readings = HostReadings;

    MemoryWatch(Reader reader, HostReader host_reader, Duration interval = kMemoryWatchInterval);
    // Stops the thread without waiting for it: a reading under way ends on
    // its own, and nothing of it reaches the loop.
    ~MemoryWatch();
    MemoryWatch(const MemoryWatch&) = delete;
    MemoryWatch& operator=(const MemoryWatch&) = delete;

    // Calls `deliver` on `event`'s loop with each round's readings. False
    // (logged) when the eventfd or the thread cannot be made.
    bool start(sd_event* event, std::function<void(const Readings&)> deliver);
    // The GPUs and processes to read from now on; none: the thread sleeps.
    void watch(std::set<std::string> uuids, std::set<int32_t> pids);

private:
    struct Shared;  // what the thread and the loop share
    // The thread: reads the GPUs asked for every `interval` until stopped.
    static void run(const std::shared_ptr<Shared>& shared, const Reader& reader,
                    const HostReader& host_reader, Duration interval);
    static int on_ready(sd_event_source* s, int fd, uint32_t revents, void* self);

    Reader reader_;
    HostReader host_reader_;
    Duration interval_;
    std::function<void(const Readings&)> deliver_;
    sd_event_source* source_ = nullptr;
    std::shared_ptr<Shared> shared_;
};

}  // namespace nvshare::daemon
