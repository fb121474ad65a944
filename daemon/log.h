// Logging for nvshared: one line per message on stderr, with
// the sd-daemon priority prefix ("<3>") so that journald files each line at
// the right priority. Not for libnvshare.so, which has its own libc-only one.
#pragma once

#include <cstdarg>
#include <string>

namespace nvshare {

enum class LogLevel { Error = 3, Warning = 4, Notice = 5, Info = 6, Debug = 7 };

void set_log_level(LogLevel max_level);
LogLevel log_level();
void log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));
// One message's text, at most a line's worth (what log() and the journal send).
std::string format_message(const char* format, va_list ap) __attribute__((format(printf, 1, 0)));

}  // namespace nvshare

#define NVS_ERROR(...) ::nvshare::log(::nvshare::LogLevel::Error, __VA_ARGS__)
#define NVS_WARN(...) ::nvshare::log(::nvshare::LogLevel::Warning, __VA_ARGS__)
#define NVS_NOTICE(...) ::nvshare::log(::nvshare::LogLevel::Notice, __VA_ARGS__)
#define NVS_INFO(...) ::nvshare::log(::nvshare::LogLevel::Info, __VA_ARGS__)
#define NVS_DEBUG(...) ::nvshare::log(::nvshare::LogLevel::Debug, __VA_ARGS__)
