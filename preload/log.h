// stderr messages of libnvshare.so: "[nvshare] ..." (debug lines:
// "[nvshare SECONDS] ...", CLOCK_MONOTONIC) written with one write(2)
// each (no stdio buffering shared with the host program).
#pragma once

namespace nvshare::preload {

void log_warn(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Turns debug lines on (NVSHARE_DEBUG). config() (env.cpp) sets it as it
// publishes the settings, before any debug line: each path that logs one has
// read config() first (its socket, its mode). Here, not by reading config(),
// so that this file needs nothing of env.cpp, which logs through it.
void set_debug_logging(bool on);

}  // namespace nvshare::preload
