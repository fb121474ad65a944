// libFuzzer target for the /etc/ld.so.preload merge (cli/preload_merge.h),
// driven the way `nvsharectl preload enable` and then `disable` drive it.
//
// Input: CURRENT <RS> ADMIN_DROP_IN <RS> NVSHARE_DROP_IN <RS> STATE, where
// CURRENT is /etc/ld.so.preload, ADMIN_DROP_IN another product's drop-in,
// NVSHARE_DROP_IN an edited nvshare.conf (missing: the one enable writes),
// STATE the merge state of an earlier run. Besides the sanitizers, it checks
// what the header promises: the result is the foreign lines, byte for byte
// and in order, followed by each entry once; merging again changes nothing;
// after disable our entry is gone unless a drop-in still lists it; enable then
// disable gives the file back; the state reads back as what was written; and
// where ld.so's reading cannot differ from the intended one, it does not;
// unlist (disable's fallback for shared lines) leaves ld.so reading every
// other name, in order, and not the unlisted one; token expansion never
// leaves a token it knows in a path it returns.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/preload_library.h"
#include "cli/preload_merge.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace pm = nvshare::preload;
using nvshare::fuzz::lines_of;

constexpr std::string_view kEntry = "/usr/$LIB/libnvshare.so";

bool contains(const std::vector<std::string>& list, std::string_view item)
{
    return std::find(list.begin(), list.end(), item) != list.end();
}

std::string_view trim_blanks(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

// The lines of `text` the merge does not own, each with its newline.
std::string foreign_lines(std::string_view text, const std::vector<std::string>& entries,
                          const std::vector<std::string>& owned)
{
    std::string kept;
    size_t start = 0;
    for (std::string_view line : lines_of(text)) {
        const std::string_view bare = trim_blanks(line);
        const bool with_newline = start + line.size() < text.size();
        if (bare.empty() || !(contains(entries, bare) || contains(owned, bare))) {
            kept += line;
            if (with_newline)
                kept += '\n';
        }
        start += line.size() + 1;
    }
    return kept;
}

size_t lines_holding(std::string_view text, std::string_view entry)
{
    size_t n = 0;
    for (std::string_view line : lines_of(text))
        n += trim_blanks(line) == entry;
    return n;
}

// One merge, checked against its contract; returns its result.
pm::MergeResult checked_merge(std::string_view current, const std::vector<std::string>& entries,
                              const std::vector<std::string>& owned)
{
    const pm::MergeResult result = pm::merge(current, entries, owned);
    FUZZ_CHECK(result.changed == (result.text != current));

    // Foreign lines unchanged and first, then each entry on its own line.
    std::string expected = foreign_lines(current, entries, owned);
    if (!entries.empty() && !expected.empty() && expected.back() != '\n')
        expected += '\n';
    for (const auto& e : entries)
        expected += e + "\n";
    FUZZ_CHECK(result.text == expected);
    for (const auto& e : entries)
        FUZZ_CHECK(lines_holding(result.text, e) == 1);
    for (const auto& o : owned)  // list_entries: no blanks in them
        if (!contains(entries, o))
            FUZZ_CHECK(lines_holding(result.text, o) == 0);

    // Idempotent, also with the state the merge leaves behind.
    const pm::MergeResult again = pm::merge(result.text, entries, owned);
    FUZZ_CHECK(!again.changed && again.text == result.text);
    const auto state = pm::list_entries(pm::state_text(entries));
    FUZZ_CHECK(state == entries);
    FUZZ_CHECK(pm::merge(result.text, entries, state).text == result.text);

    // An entry ld.so will not read is warned about.
    if (result.warnings.empty()) {
        const auto seen = pm::glibc_entries(result.text);
        for (const auto& e : entries)
            FUZZ_CHECK(contains(seen, e));
    }
    return result;
}

std::vector<std::string> entries_of(std::vector<pm::DropIn> drop_ins)
{
    const pm::CollectedEntries collected = pm::collect_entries(std::move(drop_ins));
    for (size_t i = 0; i < collected.entries.size(); ++i) {
        const std::string& e = collected.entries[i];
        FUZZ_CHECK(!e.empty() && e.front() == '/');
        FUZZ_CHECK(e.find_first_of(std::string_view(" \t\n:#\0", 6)) == std::string::npos);
        FUZZ_CHECK(std::find(collected.entries.begin() + static_cast<ptrdiff_t>(i) + 1,
                             collected.entries.end(), e) == collected.entries.end());
    }
    return collected.entries;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const auto fields = nvshare::fuzz::split_fields(data, size);
    const std::string& current = fields[0];
    const std::string admin = fields.size() > 1 ? fields[1] : "";
    const std::string ours = fields.size() > 2 ? fields[2] : pm::drop_in_text(kEntry);
    const std::string state = fields.size() > 3 ? fields[3] : "";

    // ld.so and the merge read a list the same way where it has no comment
    // (rtld.c's quirk) and no NUL byte.
    if (current.find_first_of(std::string_view("#\0", 2)) == std::string::npos)
        FUZZ_CHECK(pm::glibc_entries(current) == pm::list_entries(current));
    for (const auto& e : pm::list_entries(current)) {
        std::string why;
        const std::string path = pm::expand_tokens(e, {"lib/x86_64-linux-gnu", "haswell"}, &why);
        FUZZ_CHECK(path.empty() != why.empty());
        FUZZ_CHECK(path.empty() || !pm::uses_platform(path));
    }

    // unlist: same length, and ld.so reads the other names as before.
    const std::vector<std::string> before = pm::glibc_entries(current);
    if (!before.empty()) {
        const std::vector<std::string> gone = {before[before.size() / 2]};
        const std::string unlisted = pm::unlist(current, gone);
        FUZZ_CHECK(unlisted.size() == current.size());
        std::vector<std::string> expected;
        for (const auto& e : before)
            if (e != gone[0])
                expected.push_back(e);
        FUZZ_CHECK(pm::glibc_entries(unlisted) == expected);
    }

    // enable: our drop-in joins the admin's.
    const std::vector<std::string> enabled_entries =
        entries_of({{"nvshare.conf", ours}, {"10-admin.conf", admin}});
    if (fields.size() <= 2)
        FUZZ_CHECK(contains(enabled_entries, kEntry));
    const std::vector<std::string> owned = pm::list_entries(state);
    const pm::MergeResult enabled = checked_merge(current, enabled_entries, owned);

    // disable: our drop-in goes, our entry is retired, the state is the last write.
    const std::vector<std::string> disabled_entries = entries_of({{"10-admin.conf", admin}});
    std::vector<std::string> retiring = pm::list_entries(pm::state_text(enabled_entries));
    retiring.emplace_back(kEntry);
    const pm::MergeResult disabled = checked_merge(enabled.text, disabled_entries, retiring);
    FUZZ_CHECK((lines_holding(disabled.text, kEntry) == 0) != contains(disabled_entries, kEntry));

    // Enable then disable gives back the file when nothing else claimed a line.
    if (disabled_entries.empty() && owned.empty()) {
        bool claimed = false;
        for (std::string_view line : lines_of(current)) {
            const std::string_view bare = trim_blanks(line);
            claimed = claimed || contains(enabled_entries, bare) || bare == kEntry;
        }
        if (!claimed)
            FUZZ_CHECK(disabled.text == current || (!current.empty() && current.back() != '\n' &&
                                                    disabled.text == current + "\n"));
    }
    return 0;
}
