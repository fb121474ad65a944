// Whether a client's process is on its way out, and when it is gone. The
// driver gives a process's GPU memory back only as the process ends, after
// the kernel has closed its sockets, and later still where the process
// pinned much host memory (bench/README.md, driver_probes.py exit). A holder
// whose connection closes while its process exits therefore keeps its GPUs
// until the process is gone, so that the next holder finds the room
// nvshared counted for it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string_view>

namespace nvshare::daemon {

// The longest a holder's exit keeps its GPUs: an exit stuck in the driver
// must not stop the lock.
inline constexpr auto kExitWaitMax = std::chrono::seconds(10);

// From the text of /proc/PID/stat: the kernel's PF_EXITING flag (set as an
// exit begins, before the process's files close). False for text that is
// not a stat line.
bool stat_says_exiting(std::string_view proc_stat_text);

// A pidfd of `pid` (readable once the process has ended) if the process is
// exiting; -1 if it is not, is gone, or another pid namespace hides it.
int exiting_process_fd(pid_t pid);

}  // namespace nvshare::daemon
