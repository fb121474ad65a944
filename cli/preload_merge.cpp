#include "cli/preload_merge.h"

#include <algorithm>
#include <cstring>

namespace nvshare::preload {

namespace {

bool is_separator(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == ':';
}

bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

std::string_view trim_blanks(std::string_view s)
{
    while (!s.empty() && is_blank(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && is_blank(s.back()))
        s.remove_suffix(1);
    return s;
}

bool contains(const std::vector<std::string>& list, std::string_view item)
{
    return std::find(list.begin(), list.end(), item) != list.end();
}

struct Line {
    std::string_view content;  // without the newline
    bool newline = false;      // false only for a last line without one
};

std::vector<Line> split_lines(std::string_view text)
{
    std::vector<Line> lines;
    size_t start = 0;
    while (start < text.size()) {
        const size_t end = text.find('\n', start);
        if (end == std::string_view::npos) {
            lines.push_back({text.substr(start), false});
            break;
        }
        lines.push_back({text.substr(start, end - start), true});
        start = end + 1;
    }
    return lines;
}

// Why a drop-in entry cannot be used, or nullptr.
const char* invalid_entry_reason(std::string_view entry)
{
    if (entry.front() != '/')
        return "is not an absolute path (setuid programs could not load it)";
    if (entry.size() >= 4096)
        return "is longer than PATH_MAX";
    for (char ch : entry)
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
            return "contains a control character";
    return nullptr;
}

std::string printable(std::string_view s)
{
    std::string out;
    for (char ch : s) {
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            out += "\\x";
            out += hex[(static_cast<unsigned char>(ch) >> 4) & 0xf];
            out += hex[static_cast<unsigned char>(ch) & 0xf];
        } else {
            out += ch;
        }
    }
    return out;
}

}  // namespace

std::vector<Span> glibc_entry_spans(std::string_view text)
{
    std::vector<Span> out;
    if (text.empty())
        return out;  // ld.so maps nothing for an empty file
    std::string file(text);
    // rtld.c's comment removal, quirk included: it searches [file, file +
    // rest) from the start each time, and `rest` shrinks by the offset of the
    // comment found plus the bytes blanked, so late comments stay unseen and
    // one may be blanked only in part. Blanking keeps every offset.
    size_t rest = file.size();
    while (rest > 0) {
        const size_t comment = std::string_view(file.data(), rest).find('#');
        if (comment == std::string_view::npos)
            break;
        rest -= comment;
        size_t i = comment;
        do
            file[i] = ' ';
        while (--rest > 0 && file[++i] != '\n');
    }
    // rtld.c splits a NUL-terminated copy with strsep, so a NUL byte ends the
    // list; a last name without a trailing separator is loaded separately
    // (up to its own first NUL).
    size_t last = file.size();
    size_t end = file.size();
    if (!is_separator(file.back())) {
        last = file.size();
        while (last > 0 && !is_separator(file[last - 1]))
            --last;
        end = last;
    }
    const size_t head = strnlen(file.data(), end);
    size_t pos = 0;
    while (pos < head) {
        size_t stop = pos;
        while (stop < head && !is_separator(file[stop]))
            ++stop;
        if (stop > pos)
            out.push_back({pos, stop - pos});
        pos = stop + 1;
    }
    if (last < file.size() && file[last] != '\0')
        out.push_back({last, strnlen(file.data() + last, file.size() - last)});
    return out;
}

std::vector<std::string> glibc_entries(std::string_view text)
{
    std::vector<std::string> out;
    for (const Span& span : glibc_entry_spans(text))
        out.emplace_back(text.substr(span.offset, span.length));
    return out;
}

std::vector<std::string> list_entries(std::string_view text)
{
    std::vector<std::string> out;
    for (const Line& line : split_lines(text)) {
        std::string_view content = line.content.substr(0, line.content.find('#'));
        size_t pos = 0;
        while (pos < content.size()) {
            size_t stop = pos;
            while (stop < content.size() && !is_separator(content[stop]))
                ++stop;
            if (stop > pos)
                out.emplace_back(content.substr(pos, stop - pos));
            pos = stop + 1;
        }
    }
    return out;
}

bool is_drop_in_name(std::string_view name)
{
    constexpr std::string_view suffix = ".conf";
    return name.size() > suffix.size() && name.front() != '.' &&
           name.substr(name.size() - suffix.size()) == suffix;
}

CollectedEntries collect_entries(std::vector<DropIn> drop_ins)
{
    std::sort(drop_ins.begin(), drop_ins.end(),
              [](const DropIn& a, const DropIn& b) { return a.name < b.name; });
    CollectedEntries result;
    for (const auto& d : drop_ins) {
        if (d.text.size() > kMaxDropInBytes) {
            result.warnings.push_back(d.name + ": larger than 64 KiB; ignored");
            continue;
        }
        if (d.text.find('\0') != std::string::npos) {
            result.warnings.push_back(d.name + ": contains a NUL byte (not a text file); ignored");
            continue;
        }
        for (auto& entry : list_entries(d.text)) {
            if (const char* why = invalid_entry_reason(entry)) {
                result.warnings.push_back(d.name + ": '" + printable(entry) + "' " + why +
                                          "; ignored");
                continue;
            }
            if (!contains(result.entries, entry))
                result.entries.push_back(std::move(entry));
        }
    }
    return result;
}

MergeResult merge(std::string_view current, const std::vector<std::string>& entries,
                  const std::vector<std::string>& owned)
{
    MergeResult result;
    std::string out;
    out.reserve(current.size() + 128);
    for (const Line& line : split_lines(current)) {
        const std::string_view bare = trim_blanks(line.content);
        if (!bare.empty() && (contains(entries, bare) || contains(owned, bare)))
            continue;
        out += line.content;
        if (line.newline)
            out += '\n';
    }
    if (!entries.empty() && !out.empty() && out.back() != '\n')
        out += '\n';  // the last foreign line had no newline: end it
    for (const auto& e : entries) {
        out += e;
        out += '\n';
    }

    if (out.find('\0') != std::string::npos)
        result.warnings.push_back(
            "the file contains a NUL byte: ld.so reads no further than that byte");
    const std::vector<std::string> seen = glibc_entries(out);
    for (const auto& e : entries)
        if (!contains(seen, e))
            result.warnings.push_back("'" + e + "' is listed but ld.so will not read it");
    result.changed = out != current;
    result.text = std::move(out);
    return result;
}

std::string state_text(const std::vector<std::string>& entries)
{
    std::string out =
        "# Written by `nvsharectl preload merge`: the entries it last wrote to\n"
        "# /etc/ld.so.preload, taken out again once no drop-in lists them.\n";
    for (const auto& e : entries) {
        out += e;
        out += '\n';
    }
    return out;
}

std::string unlist(std::string_view text, const std::vector<std::string>& names)
{
    std::string out(text);
    for (const Span& span : glibc_entry_spans(text))
        if (contains(names, text.substr(span.offset, span.length)))
            out.replace(span.offset, span.length, span.length, ' ');
    return out;
}

std::string drop_in_text(std::string_view entry)
{
    std::string out =
        "# nvshare: share NVIDIA GPUs between local CUDA processes. See nvshare(7).\n"
        "# `nvsharectl preload enable` writes this file and `nvsharectl preload\n"
        "# disable` removes it; the entries of /etc/ld.so.preload.d/*.conf are\n"
        "# merged into /etc/ld.so.preload.\n";
    out += entry;
    out += '\n';
    return out;
}

}  // namespace nvshare::preload
