// Whether ld.so can (and should) load a library that /etc/ld.so.preload
// names: the pure part. nvsharectl gathers the facts (cli/library_facts.h);
// these functions only judge them, so every rule is tested without a file.
//
// A listed library is loaded into every process, root's and setuid ones
// included, so it is listed only if ld.so would load it without an error
// and nobody but root can change what it loads: the file and every directory
// on its path owned by root and not writable by group or others.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nvshare::preload {

// What ld.so's dynamic string tokens expand to in this system's programs;
// empty if unknown.
struct TokenValues {
    std::string_view lib;       // $LIB: e.g. "lib/x86_64-linux-gnu" (a build setting)
    std::string_view platform;  // $PLATFORM: ld.so's dl_platform (e.g. "haswell")
};

// `entry` with $LIB/${LIB} and $PLATFORM/${PLATFORM} expanded as glibc
// 2.36's _dl_dst_substitute does (a '$' before anything else stays a '$').
// Empty, with *why set, if ld.so could not expand it the same way in every
// program: $ORIGIN (another file per program, refused in setuid ones) or a
// token whose value is unknown here.
std::string expand_tokens(std::string_view entry, const TokenValues& values, std::string* why);

// True if `entry` holds $PLATFORM or ${PLATFORM} (its value costs a process
// to learn, see platform_from_diagnostics).
bool uses_platform(std::string_view entry);

// ld.so's value for $PLATFORM from the output of `ld.so --list-diagnostics`
// (its dl_platform="..." line); empty if absent. On x86-64 glibc 2.36 sets it
// from the CPU ("haswell", "xeon_phi"), so it is not always AT_PLATFORM.
std::string platform_from_diagnostics(std::string_view text);

// The ELF identity ld.so requires: that of this system's programs.
struct ElfIdentity {
    uint8_t elf_class = 0;  // EI_CLASS
    uint8_t data = 0;       // EI_DATA (byte order)
    uint16_t machine = 0;   // e_machine
};

// One file or directory, as stat(2) saw it.
struct NodeFacts {
    std::string path;
    uint32_t uid = 0;
    uint32_t mode = 0;  // st_mode, type bits included
};

// What lookup of the expanded path found.
struct LibraryFacts {
    int error = 0;           // errno of a failed lookup (ENOENT, ELOOP, ...), else 0
    std::string error_path;  // the path that failed
    // Every directory the lookup went through, symbolic links resolved, in
    // order ("/" first): whoever can write one can replace the library.
    std::vector<NodeFacts> directories;
    NodeFacts file;      // the library (symbolic links followed)
    std::string header;  // its first bytes (up to 64), if it is a regular file
    // Its dynamic section has DF_1_PIE: a position-independent executable,
    // ET_DYN like a library (ld.so refuses to preload it).
    bool pie = false;
};

// Who besides root could change what `facts` names (`what`: "file",
// "directory"): a directory on the way there, or the node itself, owned by
// another user or writable by group or others; "" if root alone can.
std::string changeable_by_others(const LibraryFacts& facts, const char* what);

// Why ld.so could not or should not load the library, or "" if it is fine.
std::string library_problem(const LibraryFacts& facts, const ElfIdentity& host);

}  // namespace nvshare::preload
