// The scheduler's basic types: ids, GPU sets and time, apart so that the
// client record (daemon/client.h) and the usage ledger can name them.
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

// Bounds on what clients report: their memory use and a GPU's memory size
// (8 TiB: sums over a million clients still fit 64 bits), and their
// cumulative swap times (2^44 us, about 200 days: sums stay within a
// nanosecond Duration). Reports past them are refused, never wrapped.
inline constexpr uint64_t kMaxReportedBytes = uint64_t{1} << 43;
inline constexpr uint64_t kMaxReportedMicroseconds = uint64_t{1} << 44;

inline constexpr GpuSet gpu_bit(GpuIndex g)
{
    return GpuSet{1} << g;
}

// Calls f(g) for each GPU g of `set`, in index order.
template <typename F>
void for_each_gpu(GpuSet set, F&& f)
{
    while (set != 0) {
        const auto g = static_cast<GpuIndex>(__builtin_ctzll(set));
        set &= set - 1;
        f(g);
    }
}

// Whole microseconds: the unit of the wire protocol, the status JSON, D-Bus,
// the journal's fields and the state file.
inline constexpr uint64_t to_usec(Duration d)
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

}  // namespace nvshare::daemon
