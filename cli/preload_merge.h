// /etc/ld.so.preload from /etc/ld.so.preload.d/*.conf: the pure part (text in,
// text out). glibc reads only /etc/ld.so.preload, a file other products edit
// too, so the merge owns nothing but lines that hold exactly one entry it
// manages: an entry a drop-in lists now, or one it wrote before (the state
// it keeps next to the drop-ins). Every other byte stays as it was.
//
// It writes no comments and no marker lines, and always appends: glibc's
// comment parser (rtld.c) searches for '#' in a window that shrinks with every
// comment it removes, so comments late in the file are read as library names,
// and anything inserted before a comment can push it out of that window.
// Appending at the end and deleting whole lines never does.
// nvsharectl preload does the file I/O; nvshare(7) describes the scheme.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nvshare::preload {

// Drop-ins larger than this are refused: they are lists of a few paths.
inline constexpr size_t kMaxDropInBytes = 64 * 1024;

// The names ld.so would try to preload from this text, in order, following
// glibc's rtld.c (2.36) exactly, including its quirks: separators are space,
// tab, newline and ':'; a '#' comment runs to the end of its line, but only
// comments inside rtld.c's shrinking search window are removed (see above);
// a NUL byte ends the list.
std::vector<std::string> glibc_entries(std::string_view text);

// Where glibc_entries' names stand in `text`: offset and length of each.
struct Span {
    size_t offset = 0;
    size_t length = 0;
};
std::vector<Span> glibc_entry_spans(std::string_view text);

// The entries of a list in the same format, read as intended: every '#'
// starts a comment. Used for the drop-ins and the merge state.
std::vector<std::string> list_entries(std::string_view text);

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

// Entries of the drop-ins (list_entries), in the byte order of their file
// names. Entries that are not absolute paths are
// ignored with a warning: in setuid programs ld.so refuses to search for
// bare names and would print an error at every start.
CollectedEntries collect_entries(std::vector<DropIn> drop_ins);

struct MergeResult {
    std::string text;
    bool changed = false;
    std::vector<std::string> warnings;
};

// The new /etc/ld.so.preload: `current` without the lines that hold exactly
// one of `entries` or `owned` (blanks around it allowed), then `entries`, one
// per line, at the end. `owned`: what the merge wrote before (its state) and
// what must go although no drop-in lists it (nvsharectl preload disable adds
// nvshare's own entry). Idempotent: merging the result again changes nothing.
MergeResult merge(std::string_view current, const std::vector<std::string>& entries,
                  const std::vector<std::string>& owned);

// The merge state, kept in the drop-in directory as ".merged": the entries
// last written, so they can be taken out once no drop-in lists them.
std::string state_text(const std::vector<std::string>& entries);

// `text` with every name ld.so reads that is one of `names` overwritten by
// blanks, wherever it stands: also on a line shared with other names, which
// merge() leaves alone. Blanks of the same length keep every other byte where
// it was, so rtld.c's comment window, and with it everything else ld.so
// reads, stays exactly as before.
std::string unlist(std::string_view text, const std::vector<std::string>& names);

// The content of the drop-in `nvsharectl preload enable` writes. The
// nvshare.conf that meson installs (systemd/nvshare-preload.conf.in) must be
// the same bytes; an installation test compares them.
std::string drop_in_text(std::string_view entry);

}  // namespace nvshare::preload
