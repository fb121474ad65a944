// The I/O behind cli/preload_library.h: what a /etc/ld.so.preload entry
// names on this system, and the facts that decide whether ld.so can load it.
#pragma once

#include <string>

#include "cli/preload_library.h"

namespace nvshare::cli {

// Looks up `path` (absolute) one component at a time, as the kernel does,
// recording every directory it passes and following symbolic links (at most
// 40, like the kernel): who owns the way there and the file. No ELF facts.
preload::LibraryFacts gather_path_facts(const std::string& path);

// gather_path_facts, then, of a regular file, its first bytes and whether it
// is a position-independent executable.
preload::LibraryFacts gather_library_facts(const std::string& path);

// What ld.so would load for an entry, and whether it may.
struct LibraryCheck {
    std::string path;      // the entry with its tokens expanded; empty if it cannot be
    std::string problem;   // why it must not be listed; empty if it may
    bool missing = false;  // the file (or a directory on the way) does not exist
};

// Checks entries against this system: its programs' ELF identity (this
// program's own) and ld.so's values for $LIB (a build setting) and
// $PLATFORM (asked of ld.so once, and only if an entry uses it).
class LibraryChecker {
public:
    LibraryChecker();
    LibraryCheck check(const std::string& entry);
    // The entry with its tokens expanded, or "" (see preload::expand_tokens).
    std::string expand(const std::string& entry, std::string* why);

private:
    preload::ElfIdentity host_;
    bool platform_asked_ = false;
    std::string platform_;
};

}  // namespace nvshare::cli
