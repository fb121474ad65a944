#include "daemon/log.h"

#include <cstdarg>
#include <cstdio>

namespace nvshare {

namespace {
LogLevel g_max_level = LogLevel::Info;
}

void set_log_level(LogLevel max_level)
{
    g_max_level = max_level;
}

LogLevel log_level()
{
    return g_max_level;
}

std::string format_message(const char* format, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, format, ap);
    return line;
}

void log(LogLevel level, const char* format, ...)
{
    if (static_cast<int>(level) > static_cast<int>(g_max_level))
        return;
    va_list ap;
    va_start(ap, format);
    const std::string line = format_message(format, ap);
    va_end(ap);
    // One write per line keeps lines whole when several processes share stderr.
    fprintf(stderr, "<%d>%s\n", static_cast<int>(level), line.c_str());
}

}  // namespace nvshare
