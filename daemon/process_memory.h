// A client process's resident anonymous host memory (RssAnon in
// /proc/PID/status): where the library keeps swapped-out copies of its GPU
// memory (preload/swap/host_memory.cpp: anonymous pages, all faulted in
// before they are registered with the driver, so all resident). Read on
// memory_watch's thread; it confirms a client's swappable memory beside
// NVML's count (Scheduler::confirm_host_memory). File-backed pages are left
// out: they are shared with every process mapping the same file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace nvshare::daemon {

// The RssAnon line of /proc/PID/status's text, in bytes; nullopt without one.
std::optional<uint64_t> rss_anon_of(std::string_view proc_status);

// rss_anon_of /proc/PID/status; nullopt when it cannot be read (the process
// is gone or hidden).
std::optional<uint64_t> process_anon_memory(pid_t pid);

}  // namespace nvshare::daemon
