// stderr messages of libnvshare.so: "[nvshare] ..." (debug lines:
// "[nvshare SECONDS] ...", CLOCK_MONOTONIC) written with one write(2)
// each (no stdio buffering shared with the host program).
#pragma once

namespace nvshare::preload {

void log_warn(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace nvshare::preload
