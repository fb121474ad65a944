// When the scheduler's tick() must look at a client next, in (time, client)
// order: each client's own deadline (ClientRecord::deadline, which only
// set() changes, so that its entry here and its record agree), and one
// entry for each GPU's soft-turn followers that stands for all of them
// (soft_followers.h). Part of the scheduling core, pure.
#pragma once

#include <optional>
#include <set>
#include <utility>

#include "daemon/client.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

class Deadlines {
public:
    using Entry = std::pair<TimePoint, ClientId>;

    // Client `c`'s own deadline becomes `at` (none: it has none).
    void set(ClientRecord& c, std::optional<TimePoint> at)
    {
        if (at == c.deadline)
            return;
        if (c.deadline)
            entries_.erase({*c.deadline, c.id});
        c.deadline = at;
        if (at)
            entries_.insert({*at, c.id});
    }
    // An entry that stands for others too, under the id of one of them.
    void add(Entry e) { entries_.insert(e); }
    void remove(Entry e) { entries_.erase(e); }

    // The first entry, if it is due by `now`.
    std::optional<Entry> due(TimePoint now) const
    {
        if (entries_.empty() || entries_.begin()->first > now)
            return std::nullopt;
        return *entries_.begin();
    }
    // Whether another entry comes due at the same time as `e`, after it
    // and before client `before`.
    bool another_before(Entry e, ClientId before) const
    {
        const auto next = entries_.upper_bound(e);
        return next != entries_.end() && next->first == e.first && next->second < before;
    }
    std::optional<TimePoint> next() const
    {
        return entries_.empty() ? std::nullopt : std::optional(entries_.begin()->first);
    }

private:
    std::set<Entry> entries_;
};

}  // namespace nvshare::daemon
