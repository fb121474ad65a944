// The scheduler's basic types, apart so that small modules the Scheduler
// holds (daemon/usage.h) can name them without the whole scheduler.h.
#pragma once

#include <chrono>
#include <cstdint>

namespace nvshare::daemon {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = std::chrono::nanoseconds;

using ClientId = uint64_t;
using GpuIndex = uint32_t;  // daemon-wide, in order of discovery
using GpuSet = uint64_t;    // bit i = GpuIndex i

struct Client;

}  // namespace nvshare::daemon
