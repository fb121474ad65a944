// The library's one clock: CLOCK_MONOTONIC in nanoseconds (deadlines, idle
// periods, swap timings).
#pragma once

#include <time.h>

#include <cstdint>

namespace nvshare::preload {

inline uint64_t now_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace nvshare::preload
