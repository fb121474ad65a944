// The waiters of one GPU taken in soft turns whose join time there is the
// holders' start alone (Scheduler::follower_gpu): they have not started, wait
// for this GPU alone among those taken in turns, are not interactive, and
// their own bound (policy::join_after) has come. So they all share one
// deadline, `at`, which the scheduler keeps in its deadline set once, under
// the smallest of their ids: they come due together, in (time, client) order
// as if each had its own entry. Part of the scheduler, and pure like it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "daemon/client.h"
#include "daemon/scheduler_types.h"
#include "daemon/turn_policy.h"

namespace nvshare::daemon {

class SoftFollowers {
public:
    using Bucket = std::pair<uint32_t, int>;                   // (principal, class rank)
    using Arrivals = std::set<std::pair<uint64_t, ClientId>>;  // (sequence, client)

    void add(const ClientRecord& c)
    {
        ids_.insert(c.id);
        by_bucket_[bucket_of(c)].insert({c.sequence, c.id});
    }
    void remove(const ClientRecord& c)
    {
        ids_.erase(c.id);
        const auto it = by_bucket_.find(bucket_of(c));
        if (it == by_bucket_.end())
            return;
        it->second.erase({c.sequence, c.id});
        if (it->second.empty())
            by_bucket_.erase(it);
    }
    bool empty() const { return ids_.empty(); }
    ClientId first() const { return *ids_.begin(); }
    ClientId last() const { return *ids_.rbegin(); }
    // Calls f(bucket, arrivals) for each (user, class) among them; in a
    // bucket the line's order is the arrivals' (WaitingLine).
    template <typename F>
    void for_each_bucket(F&& f) const
    {
        for (const auto& [bucket, arrivals] : by_bucket_)
            f(bucket, arrivals);
    }

    // Their deadline: the holders' start as it was when last worked out;
    // none while no holder is starting.
    std::optional<TimePoint> at;

    // Those that will follow once their own bound comes (Scheduler::pending),
    // by that bound; their deadline is their bound, but for those in
    // `driven`, whose deadline was the holders' start, later.
    std::set<std::pair<TimePoint, ClientId>> pending;
    std::set<ClientId> driven;

private:
    static Bucket bucket_of(const ClientRecord& c)
    {
        return {c.info.principal, policy::class_rank(c.info.priority)};
    }
    std::set<ClientId> ids_;
    std::map<Bucket, Arrivals> by_bucket_;
};

}  // namespace nvshare::daemon
