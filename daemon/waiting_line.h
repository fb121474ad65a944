// One GPU's waiters in the order they go (Scheduler::queue): by rank (their
// class's, raised by waiting: policy::waiting_rank), then by their user's
// held time, then first come first. That order moves with time, but never
// within one user's waiters of one class: there the first come go first. So
// the waiters sit in one bucket per (user, class), in arrival order, and the
// order of the whole line is worked out from the buckets when asked: its
// first waiters and any waiter's place cost O(buckets x log(waiters)), never
// a walk of the line. Part of the scheduler, and pure like it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon/client.h"
#include "daemon/ranked_map.h"
#include "daemon/scheduler_types.h"
#include "daemon/turn_policy.h"

namespace nvshare::daemon {

// What the order depends on besides the waiters: the time, how long a wait
// raises a rank by one, and each user's held time.
struct LineOrder {
    TimePoint now{};
    Duration aging{};
    const policy::UserShares* shares = nullptr;
};

class WaitingLine {
public:
    // `c` waits here, with the sequence, class, principal and waiting_since
    // it keeps while it waits; one waiting_since never precedes that of an
    // earlier sequence (the time never goes back).
    void add(const ClientRecord& c);
    // `c` no longer waits here (its record unchanged since add).
    void remove(const ClientRecord& c);
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    // More than one (user, class) waits: then some may outrank others.
    bool mixed() const { return buckets_.size() > 1; }

    std::optional<ClientId> head(const LineOrder& order) const;
    // The first that is not `besides`.
    std::optional<ClientId> goes_next(const LineOrder& order, ClientId besides) const;
    // The first `n`, in order.
    std::vector<ClientId> first(const LineOrder& order, size_t n) const;
    // All of them, in order (a walk: for views and for events that look at
    // every waiter anyway).
    std::vector<ClientId> all(const LineOrder& order) const;
    // The place of `c`, which waits here (1: next).
    uint32_t place(const LineOrder& order, const ClientRecord& c) const;
    // The rank of `c` by the order: its class's, raised by waiting.
    int rank(const LineOrder& order, const ClientRecord& c) const;
    // The best class among them (policy::class_rank); INT32_MAX if none.
    int best_class() const;
    // Where `c` (which waits here, or would) stands in the order: one
    // waiter goes before another exactly when its position is less.
    using Position = std::tuple<int, double, uint64_t>;  // (rank, user's held time, sequence)
    Position position_of(const LineOrder& order, const ClientRecord& c) const;

    // Calls f(principal, class rank) for each (user, class) that waits.
    template <typename F>
    void for_each_bucket(F&& f) const
    {
        for (const auto& [bucket, arrivals] : buckets_)
            f(bucket.first, bucket.second);
    }
    // Calls f(id) for every waiter, in no particular order.
    template <typename F>
    void for_each(F&& f) const
    {
        any_of([&](ClientId id) {
            f(id);
            return false;
        });
    }
    // Whether pred(id) holds for a waiter: calls it, in no particular
    // order, until it does.
    template <typename P>
    bool any_of(P&& pred) const
    {
        bool found = false;
        for (const auto& [bucket, arrivals] : buckets_) {
            arrivals.for_each([&](const Key& k, const TimePoint&) {
                found = pred(k.second);
                return !found;
            });
            if (found)
                return true;
        }
        return false;
    }

private:
    using Key = std::pair<uint64_t, ClientId>;   // (sequence, client)
    using Bucket = std::pair<uint32_t, int>;     // (principal, class rank)
    using Arrivals = RankedMap<Key, TimePoint>;  // by arrival: waiting_since
    static Bucket bucket_of(const ClientRecord& c);
    static Position position(const LineOrder& order, int class_rank, double held, const Key& key,
                             TimePoint since);
    static double held(const LineOrder& order, uint32_t principal);
    std::optional<ClientId> first_besides(const LineOrder& order,
                                          std::optional<ClientId> besides) const;

    std::map<Bucket, Arrivals> buckets_;
    size_t size_ = 0;
};

}  // namespace nvshare::daemon
