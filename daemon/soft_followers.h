// The members of one GPU taken in soft turns, by what their deadline
// depends on. Followers: waiters whose join time there is the holders'
// start alone (Scheduler::follower_gpu): they have not started, wait for
// this GPU alone among those taken in turns, are not interactive, and their
// own bound (policy::join_after) has come. So they all share one deadline,
// at(), kept in the deadline set once, under the smallest of their ids:
// they come due together, in (time, client) order as if each had its own
// entry. Pending: those that will follow once their own bound comes, their
// deadline that bound (but for the `driven` ones, whose deadline was the
// holders' start, later). Loose: the other waiters; others: the members
// that are neither followers nor pending. It keeps the client's record
// (ClientRecord::follows, pending) and the deadline set in step with these;
// the scheduler says who belongs where. Part of the scheduling core, pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "daemon/client.h"
#include "daemon/deadlines.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

class SoftFollowers {
public:
    using Bucket = std::pair<uint32_t, int>;                   // (principal, class rank)
    using Arrivals = std::set<std::pair<uint64_t, ClientId>>;  // (sequence, client)

    // ---- the members and waiters that are neither followers nor pending --
    void joined(ClientId id) { others_.insert(id); }
    void left(ClientId id) { others_.erase(id); }
    void queued(ClientId id) { loose_.insert(id); }
    void unqueued(ClientId id) { loose_.erase(id); }
    const std::set<ClientId>& others() const { return others_; }
    const std::set<ClientId>& loose() const { return loose_; }

    // ---- followers ------------------------------------------------------
    // `c` (without a deadline of its own) joins them on `gpu`.
    void follow(ClientRecord& c, GpuIndex gpu, Deadlines& deadlines);
    // `c` leaves them, their deadline becoming its own; among the loose
    // waiters where it still waits.
    void unfollow(ClientRecord& c, bool still_waiting, Deadlines& deadlines);
    // Their deadline: the holders' start as it was when last worked out;
    // none while no holder is starting.
    void set_at(std::optional<TimePoint> at, Deadlines& deadlines);
    std::optional<TimePoint> at() const { return at_; }
    bool empty() const { return ids_.empty(); }
    ClientId first() const { return *ids_.begin(); }
    ClientId last() const { return *ids_.rbegin(); }
    // Whether a user among them may join the holders (may_join(principal)).
    template <typename MayJoin>
    bool any_may_join(MayJoin&& may_join) const
    {
        for (const auto& [bucket, arrivals] : by_bucket_)
            if (may_join(bucket.first))
                return true;
        return false;
    }
    // The first in line (place_of(id): a place in the line) after `passed`
    // among each (user, class)'s first follower after it, of the users who
    // may join: in a bucket the line's order is the arrivals' (WaitingLine).
    template <typename Place, typename PlaceOf, typename MayJoin>
    std::optional<Place> next_in_line(const std::optional<Place>& passed, PlaceOf&& place_of,
                                      MayJoin&& may_join) const
    {
        std::optional<Place> best;
        for (const auto& [bucket, arrivals] : by_bucket_) {
            if (!may_join(bucket.first))
                continue;
            for (const auto& [sequence, id] : arrivals) {
                const Place at = place_of(id);
                if (passed && at <= *passed)
                    continue;
                if (!best || at < *best)
                    best = at;
                break;
            }
        }
        return best;
    }

    // ---- pending ----------------------------------------------------------
    // `c`, pending nowhere or at `pending` already, is pending at it (its
    // GPU, its bound), with deadline `deadline`.
    void set_pending(ClientRecord& c, std::pair<GpuIndex, TimePoint> pending,
                     std::optional<TimePoint> deadline);
    // `c` pending here leaves; among the loose waiters where it still waits.
    void clear_pending(ClientRecord& c, bool still_waiting);
    // By their bound.
    const std::set<std::pair<TimePoint, ClientId>>& pending() const { return pending_; }
    // The pending ones whose deadline may have moved where the holders'
    // start is `upto`: those whose bound comes by then, and the driven ones.
    std::vector<ClientId> to_update(TimePoint upto) const;

    // Every follower and pending one becomes loose (their bound may move).
    void disband(std::map<ClientId, ClientRecord>& clients, Deadlines& deadlines);

private:
    static Bucket bucket_of(const ClientRecord& c);

    std::set<ClientId> ids_;
    std::map<Bucket, Arrivals> by_bucket_;
    std::optional<TimePoint> at_;
    std::set<std::pair<TimePoint, ClientId>> pending_;
    std::set<ClientId> driven_;
    std::set<ClientId> loose_;
    std::set<ClientId> others_;
};

}  // namespace nvshare::daemon
