// Processes libnvshare.so must leave alone: nvshared itself, and whatever the
// administrator lists in /etc/nvshare/preload-exclude.conf. libc-only and
// allocation-free, like the rest of the library; checked at the first CUDA
// call, never in a constructor. nvshare(7) documents the list.
#pragma once

#include <cstddef>

// Where the administrator's lists live, and how much of one is read: the
// buffer to pass to nvshare_load_exclusion_list (nvshare(7) documents both).
// The exclusion list names programs left alone entirely; the plain-memory
// list, in the same format, programs whose device allocations stay plain
// device memory (still scheduled, see libnvshare(8)).
extern const char* const nvshare_exclusion_list_path;
extern const char* const nvshare_plain_list_path;
inline constexpr size_t nvshare_exclusion_list_max = 4096;

// True if the process is excluded. `exe_path` is its executable
// (/proc/self/exe, may be null), `comm` its name (/proc/self/comm, at most 15
// characters, may be null), `list_text` the list (NUL-terminated, may be
// null): one entry per line, '#' starts a comment, blanks around an entry
// are ignored. An entry starting with '/' names an executable by its path;
// any other entry a process name, compared with the executable's file name
// and with `comm` (which the kernel cuts to 15 characters). nvshared is
// always excluded.
bool nvshare_is_excluded(const char* exe_path, const char* comm, const char* list_text);

// True if an entry of `list_text` names the process, by the rules above
// (without the rule for nvshared).
bool nvshare_is_listed(const char* exe_path, const char* comm, const char* list_text);

// Reads the list at `path` into buf (NUL-terminated) with open/read only.
// Returns the bytes kept; 0 if the file is missing or unreadable. A list
// longer than the buffer loses its incomplete last line, never half an entry.
size_t nvshare_load_exclusion_list(const char* path, char* buf, size_t size);
