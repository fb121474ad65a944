#include "preload/log.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace nvshare::preload {

namespace {

std::atomic<bool> g_debug{false};

// Debug lines carry CLOCK_MONOTONIC seconds, so that the lines of several
// processes (and of nvshared's journal) can be put in order.
void emit(bool timestamp, const char* format, va_list args)
{
    char line[512];
    int n;
    if (timestamp) {
        timespec ts{};
        clock_gettime(CLOCK_MONOTONIC, &ts);
        n = snprintf(line, sizeof line,
                     "[nvshare %lld.%06ld] pid %d: ", static_cast<long long>(ts.tv_sec),
                     ts.tv_nsec / 1000, static_cast<int>(getpid()));
    } else {
        n = snprintf(line, sizeof line, "[nvshare] pid %d: ", static_cast<int>(getpid()));
    }
    if (n < 0)
        return;
    const int m = vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
    if (m > 0)
        n += m;
    if (static_cast<size_t>(n) > sizeof line - 2)
        n = static_cast<int>(sizeof line - 2);
    line[n++] = '\n';
    ssize_t unused = write(STDERR_FILENO, line, static_cast<size_t>(n));
    (void)unused;
}

}  // namespace

void set_debug_logging(bool on)
{
    g_debug.store(on, std::memory_order_relaxed);
}

void log_warn(const char* format, ...)
{
    va_list args;
    va_start(args, format);
    emit(false, format, args);
    va_end(args);
}

void log_debug(const char* format, ...)
{
    if (!g_debug.load(std::memory_order_relaxed))
        return;
    va_list args;
    va_start(args, format);
    emit(true, format, args);
    va_end(args);
}

}  // namespace nvshare::preload
