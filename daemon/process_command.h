// A client's command line, for the status and the journal: the 15-byte comm
// of the thread that connected says "python3" for every notebook. Read from
// /proc/PID/cmdline when the process registers (its host pid, from
// SO_PEERCRED, so container processes are found too).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace nvshare::daemon {

// The most of a command line kept: longer ones are cut (and end in "...").
inline constexpr size_t kCommandLineMax = 1024;

// /proc/PID/cmdline's text (arguments each ended by a NUL) as one line:
// arguments joined by spaces, NULs at the end dropped, cut at
// kCommandLineMax bytes. Not yet made printable (printable_text.h).
std::string command_line_text(std::string_view proc_cmdline);

// command_line_text of /proc/PID/cmdline; empty when it cannot be read (the
// process is gone or hidden, or it is a kernel thread).
std::string process_command_line(pid_t pid);

}  // namespace nvshare::daemon
