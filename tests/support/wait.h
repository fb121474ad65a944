// Waiting on a real condition, never on time alone.
#pragma once

#include <chrono>
#include <functional>

namespace nvshare::test {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// Long enough for a loaded 2-core CI machine running a sanitizer build;
// tests never wait this long unless they are failing.
inline constexpr Millis kTimeout = 20s;

// Polls `condition` every `interval` until it holds (true) or `timeout`
// passes (false).
bool wait_until(const std::function<bool()>& condition, Millis timeout = kTimeout,
                Millis interval = 10ms);

}  // namespace nvshare::test
