#include "cli/preload_library.h"

#include <elf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace nvshare::preload {

namespace {

// glibc's is_dst: the length of "NAME" or "{NAME}" at `rest` (just after a
// '$'), or 0. A plain name must not run on into [A-Za-z0-9_].
size_t token_length(std::string_view rest, std::string_view name)
{
    const bool curly = !rest.empty() && rest[0] == '{';
    if (curly)
        rest.remove_prefix(1);
    if (rest.substr(0, name.size()) != name)
        return 0;
    const char next = rest.size() > name.size() ? rest[name.size()] : '\0';
    if (curly && next != '}')
        return 0;
    if ((next >= 'A' && next <= 'Z') || (next >= 'a' && next <= 'z') ||
        (next >= '0' && next <= '9') || next == '_')
        return 0;
    return name.size() + (curly ? 2 : 0);
}

std::string octal_mode(uint32_t mode)
{
    char buf[8];
    snprintf(buf, sizeof buf, "%04o", mode & 07777);
    return buf;
}

std::string machine_name(uint16_t machine)
{
    switch (machine) {
        case EM_386:
            return "i386";
        case EM_X86_64:
            return "x86-64";
        case EM_ARM:
            return "ARM";
        case EM_AARCH64:
            return "AArch64";
        case EM_PPC64:
            return "PowerPC64";
        case EM_S390:
            return "S/390";
        case EM_RISCV:
            return "RISC-V";
        default:
            return "machine " + std::to_string(machine);
    }
}

std::string class_name(uint8_t elf_class)
{
    return elf_class == ELFCLASS32   ? "32-bit"
           : elf_class == ELFCLASS64 ? "64-bit"
                                     : "class " + std::to_string(elf_class);
}

uint16_t half(std::string_view header, size_t offset, uint8_t data)
{
    const auto lo = static_cast<uint8_t>(header[data == ELFDATA2LSB ? offset : offset + 1]);
    const auto hi = static_cast<uint8_t>(header[data == ELFDATA2LSB ? offset + 1 : offset]);
    return static_cast<uint16_t>(lo | hi << 8);
}

// Who can replace `node`: root only, or someone else too.
std::string unsafe_owner_or_mode(const NodeFacts& node, const char* what)
{
    if (node.uid != 0)
        return std::string(what) + " " + node.path + " is owned by uid " +
               std::to_string(node.uid) + ", not root";
    if ((node.mode & (S_IWGRP | S_IWOTH)) != 0)
        return std::string(what) + " " + node.path + " is writable by group or others (mode " +
               octal_mode(node.mode) + ")";
    return {};
}

std::string elf_problem(std::string_view h, const ElfIdentity& host)
{
    if (h.size() < EI_NIDENT || memcmp(h.data(), ELFMAG, SELFMAG) != 0)
        return "is not an ELF file";
    const auto elf_class = static_cast<uint8_t>(h[EI_CLASS]);
    if (elf_class != host.elf_class)
        return "is a " + class_name(elf_class) + " ELF object; programs here are " +
               class_name(host.elf_class);
    if (static_cast<uint8_t>(h[EI_DATA]) != host.data)
        return "has the wrong byte order for this machine";
    if (static_cast<uint8_t>(h[EI_VERSION]) != EV_CURRENT)
        return "has an unknown ELF version";
    const size_t size = elf_class == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    if (h.size() < size)
        return "has a truncated ELF header";
    // e_type and e_machine follow e_ident in both classes.
    const uint16_t type = half(h, EI_NIDENT, host.data);
    const uint16_t machine = half(h, EI_NIDENT + 2, host.data);
    if (machine != host.machine)
        return "is built for " + machine_name(machine) + "; programs here are " +
               machine_name(host.machine);
    if (type == ET_EXEC)
        return "is an executable, not a shared object";
    if (type != ET_DYN)
        return "is not a shared object (ELF type " + std::to_string(type) + ")";
    return {};
}

}  // namespace

std::string expand_tokens(std::string_view entry, const TokenValues& values, std::string* why)
{
    std::string out;
    size_t i = 0;
    while (i < entry.size()) {
        if (entry[i] != '$') {
            out += entry[i++];
            continue;
        }
        const std::string_view rest = entry.substr(i + 1);
        // glibc's order: ORIGIN, PLATFORM, LIB.
        if (token_length(rest, "ORIGIN") != 0) {
            *why =
                "uses $ORIGIN, which names another file in every program and which ld.so "
                "refuses in setuid programs";
            return {};
        }
        std::string_view value;
        size_t length = token_length(rest, "PLATFORM");
        if (length != 0) {
            value = values.platform;
            if (value.empty()) {
                *why = "uses $PLATFORM, and ld.so did not say what it expands to";
                return {};
            }
        } else if ((length = token_length(rest, "LIB")) != 0) {
            value = values.lib;
            if (value.empty()) {
                *why = "uses $LIB, whose value this build of nvsharectl does not know";
                return {};
            }
        } else {
            out += entry[i++];  // not a token: ld.so keeps the '$'
            continue;
        }
        out += value;
        i += 1 + length;
    }
    return out;
}

bool uses_platform(std::string_view entry)
{
    for (size_t i = entry.find('$'); i != std::string_view::npos; i = entry.find('$', i + 1))
        if (token_length(entry.substr(i + 1), "PLATFORM") != 0)
            return true;
    return false;
}

std::string platform_from_diagnostics(std::string_view text)
{
    constexpr std::string_view key = "dl_platform=\"";
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos)
            end = text.size();
        const std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        if (line.substr(0, key.size()) != key)
            continue;
        const std::string_view value = line.substr(key.size());
        const size_t quote = value.find('"');
        // ld.so quotes unusual bytes with '\'; no platform name has them.
        if (quote == std::string_view::npos || quote + 1 != value.size() ||
            value.substr(0, quote).find('\\') != std::string_view::npos)
            return {};
        return std::string(value.substr(0, quote));
    }
    return {};
}

std::string changeable_by_others(const LibraryFacts& facts, const char* what)
{
    for (const NodeFacts& dir : facts.directories)
        if (std::string why = unsafe_owner_or_mode(dir, "directory"); !why.empty())
            return why;
    return unsafe_owner_or_mode(facts.file, what);
}

std::string library_problem(const LibraryFacts& facts, const ElfIdentity& host)
{
    if (facts.error != 0)
        return facts.error == ENOENT
                   ? "no such file: " + facts.error_path
                   : "cannot look up " + facts.error_path + ": " + strerror(facts.error);
    for (const NodeFacts& dir : facts.directories)
        if (std::string why = unsafe_owner_or_mode(dir, "directory"); !why.empty())
            return why;
    if (!S_ISREG(facts.file.mode))
        return facts.file.path + " is not a regular file";
    if (std::string why = changeable_by_others(facts, "file"); !why.empty())
        return why;
    // ld.so opens it with the starting process's rights.
    if ((facts.file.mode & (S_IRUSR | S_IRGRP | S_IROTH)) != (S_IRUSR | S_IRGRP | S_IROTH))
        return facts.file.path + " is not readable by every user (mode " +
               octal_mode(facts.file.mode) + ")";
    if (std::string why = elf_problem(facts.header, host); !why.empty())
        return facts.file.path + " " + why;
    if (facts.pie)
        return facts.file.path + " is an executable (position-independent), not a shared object";
    return {};
}

}  // namespace nvshare::preload
