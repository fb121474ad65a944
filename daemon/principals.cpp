#include "daemon/principals.h"

#include <algorithm>
#include <charconv>
#include <limits>

namespace nvshare::daemon {

namespace {

std::optional<uint64_t> number(std::string_view s)
{
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty())
        return std::nullopt;
    return v;
}

}  // namespace

Principals Principals::parse(std::string_view text, const Resolve& uid_of,
                             std::vector<std::string>* problems)
{
    Principals p;
    size_t line_no = 0;
    while (!text.empty()) {
        const size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        ++line_no;
        if (line.empty() || line.front() == '#')
            continue;
        auto problem = [&](const std::string& why) {
            if (problems != nullptr)
                problems->push_back("line " + std::to_string(line_no) + ": " + why);
        };
        const size_t c1 = line.find(':');
        const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
        if (c2 == std::string_view::npos || line.find(':', c2 + 1) != std::string_view::npos) {
            problem("not owner:first:count");
            continue;
        }
        const std::string owner_text(line.substr(0, c1));
        const auto first = number(line.substr(c1 + 1, c2 - c1 - 1));
        const auto count = number(line.substr(c2 + 1));
        constexpr uint64_t kMaxUid = std::numeric_limits<uid_t>::max() - 1;  // -1 is no uid
        if (owner_text.empty() || !first || !count || *count == 0 || *first > kMaxUid ||
            *count - 1 > kMaxUid - *first) {
            problem("not owner:first:count with a range of valid uids");
            continue;
        }
        std::optional<uid_t> owner;
        if (const auto n = number(owner_text); n && *n <= kMaxUid)
            owner = static_cast<uid_t>(*n);
        else if (uid_of)
            owner = uid_of(owner_text);
        if (!owner) {
            problem("no user " + owner_text);
            continue;
        }
        if (*owner == 0)
            continue;  // root's ranges stay apart (principals.h)
        p.ranges_.push_back(
            {static_cast<uid_t>(*first), static_cast<uid_t>(*first + *count - 1), *owner});
    }
    std::sort(p.ranges_.begin(), p.ranges_.end(),
              [](const Range& a, const Range& b) { return a.first < b.first; });
    // Overlapping ranges would make a uid two people's: the later entries
    // that overlap an earlier one are left out.
    std::vector<Range> kept;
    for (const Range& r : p.ranges_) {
        if (!kept.empty() && r.first <= kept.back().last) {
            if (problems != nullptr)
                problems->push_back("the range " + std::to_string(r.first) + "-" +
                                    std::to_string(r.last) + " overlaps another; left out");
            continue;
        }
        kept.push_back(r);
    }
    p.ranges_ = std::move(kept);
    return p;
}

uid_t Principals::of(uid_t uid) const
{
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), uid,
                               [](uid_t u, const Range& r) { return u < r.first; });
    if (it == ranges_.begin())
        return uid;
    --it;
    return uid <= it->last ? it->owner : uid;
}

}  // namespace nvshare::daemon
