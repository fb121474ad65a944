// /etc/ld.so.preload from /etc/ld.so.preload.d/*.conf: the pure part (text in,
// text out). glibc reads only /etc/ld.so.preload, a file other products edit
// too, so the merge owns exactly two kinds of lines and keeps every other
// byte as it was:
//   - the block between kBeginMarker and kEndMarker, which it regenerates;
//   - a line holding nothing but one of the entries it is about to write (or
//     one it is told to retire), which it takes into the block so no entry is
//     listed twice.
// nvsharectl preload does the file I/O; nvshare(7) describes the scheme.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nvshare::preload {

// First line of the managed block (matched as a prefix, so its wording may
// change between versions) and its last line (matched exactly, ignoring
// trailing blanks).
inline constexpr std::string_view kBeginMarker = "# >>> ld.so.preload.d";
inline constexpr std::string_view kEndMarker = "# <<< ld.so.preload.d";

// Drop-ins larger than this are refused: they are lists of a few paths.
inline constexpr size_t kMaxDropInBytes = 64 * 1024;

// The names ld.so would try to preload from this text, in order, following
// glibc's rtld.c exactly: '#' comments to end of line; separators are space,
// tab, newline and ':'; a NUL byte ends the list.
std::vector<std::string> glibc_entries(std::string_view text);

// A drop-in file of /etc/ld.so.preload.d: only "*.conf" names that do not
// start with a dot count (editors' and our own temporary files do not).
bool is_drop_in_name(std::string_view name);

struct DropIn {
    std::string name;  // file name, no directory
    std::string text;
};

struct CollectedEntries {
    std::vector<std::string> entries;   // in file-name order, each once
    std::vector<std::string> warnings;  // entries or files that were ignored, and why
};

// Entries of the drop-ins, read like /etc/ld.so.preload itself, in the
// byte order of their file names. Entries that are not absolute paths are
// ignored with a warning: in setuid programs ld.so refuses to search for
// bare names and would print an error at every start.
CollectedEntries collect_entries(std::vector<DropIn> drop_ins);

struct MergeResult {
    std::string text;
    bool changed = false;
    std::vector<std::string> warnings;
};

// The new /etc/ld.so.preload: `current` with the managed block listing
// `entries` (no block when there are none). `retired` names entries to take
// out even though no drop-in lists them any more (nvsharectl preload disable
// passes nvshare's own). Idempotent: merge(merge(x).text) leaves it unchanged.
MergeResult merge(std::string_view current, const std::vector<std::string>& entries,
                  const std::vector<std::string>& retired = {});

// `entry` with ld.so's $LIB / ${LIB} token replaced by `lib` (e.g.
// "lib/x86_64-linux-gnu"); empty if the entry holds a dynamic string token
// that cannot be expanded here ($PLATFORM, $ORIGIN, or $LIB with `lib`
// empty), so the caller cannot check the file.
std::string expand_lib_token(std::string_view entry, std::string_view lib);

// The content of the drop-in `nvsharectl preload enable` writes. The
// nvshare.conf that meson installs (systemd/nvshare-preload.conf.in) must be
// the same bytes; an installation test compares them.
std::string drop_in_text(std::string_view entry);

}  // namespace nvshare::preload
