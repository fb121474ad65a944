// The range of a time quantum or grace period, the one place it is defined:
// nvshared's options, config file and D-Bus setters, and nvsharectl's check
// before it calls, all use it.
#pragma once

#include <chrono>

namespace nvshare {

inline constexpr std::chrono::microseconds kMinTimeQuantum = std::chrono::milliseconds(1);
inline constexpr std::chrono::microseconds kMaxTimeQuantum = std::chrono::hours(24);
inline constexpr const char* kTimeQuantumRange = "1ms to 24h";

constexpr bool valid_time_quantum(std::chrono::nanoseconds d)
{
    return d >= kMinTimeQuantum && d <= kMaxTimeQuantum;
}

}  // namespace nvshare
