#include "preload/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>

#include "preload/env.h"

namespace nvshare::preload {

namespace {

void emit(const char* format, va_list args)
{
    char line[512];
    int n = snprintf(line, sizeof line, "[nvshare] pid %d: ", static_cast<int>(getpid()));
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

void log_warn(const char* format, ...)
{
    va_list args;
    va_start(args, format);
    emit(format, args);
    va_end(args);
}

void log_debug(const char* format, ...)
{
    if (!config().debug)
        return;
    va_list args;
    va_start(args, format);
    emit(format, args);
    va_end(args);
}

}  // namespace nvshare::preload
