#include "daemon/waiting_line.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <queue>

namespace nvshare::daemon {

WaitingLine::Bucket WaitingLine::bucket_of(const ClientRecord& c)
{
    return {c.info.principal, policy::class_rank(c.info.priority)};
}

WaitingLine::Position WaitingLine::position(const LineOrder& order, int class_rank, double held,
                                            const Key& key, TimePoint since)
{
    return {policy::aged_rank(class_rank, order.now - since, order.aging), held, key.first};
}

double WaitingLine::held(const LineOrder& order, uint32_t principal)
{
    return order.shares != nullptr ? order.shares->held(principal, order.now) : 0;
}

void WaitingLine::add(const ClientRecord& c)
{
    if (buckets_[bucket_of(c)].insert({c.sequence, c.id}, c.waiting_since))
        size_++;
}

void WaitingLine::remove(const ClientRecord& c)
{
    const auto it = buckets_.find(bucket_of(c));
    if (it == buckets_.end() || !it->second.erase({c.sequence, c.id}))
        return;
    size_--;
    if (it->second.empty())
        buckets_.erase(it);
}

std::optional<ClientId> WaitingLine::head(const LineOrder& order) const
{
    return first_besides(order, std::nullopt);
}

std::optional<ClientId> WaitingLine::goes_next(const LineOrder& order, ClientId besides) const
{
    return first_besides(order, besides);
}

std::optional<ClientId> WaitingLine::first_besides(const LineOrder& order,
                                                   std::optional<ClientId> besides) const
{
    if (buckets_.size() == 1) {  // one user, one class: first come first
        const Arrivals& only = buckets_.begin()->second;
        const size_t i = only.at(0).first.second == besides ? 1 : 0;
        return i < only.size() ? std::optional<ClientId>(only.at(i).first.second) : std::nullopt;
    }
    std::optional<ClientId> best;
    Position best_at{};
    for (const auto& [bucket, arrivals] : buckets_) {
        // A bucket's first, or its second where the first is `besides`.
        const size_t i = arrivals.at(0).first.second == besides ? 1 : 0;
        if (i >= arrivals.size())
            continue;
        const auto [key, since] = arrivals.at(i);
        const Position at = position(order, bucket.second, held(order, bucket.first), key, since);
        if (!best || at < best_at) {
            best = key.second;
            best_at = at;
        }
    }
    return best;
}

std::vector<ClientId> WaitingLine::first(const LineOrder& order, size_t n) const
{
    std::vector<ClientId> ids;
    if (n == 0)
        return ids;
    if (buckets_.size() == 1) {  // one user, one class: first come first
        buckets_.begin()->second.for_each([&](const Key& key, const TimePoint&) {
            ids.push_back(key.second);
            return ids.size() < n;
        });
        return ids;
    }
    std::vector<std::pair<Position, ClientId>> candidates;
    for (const auto& [bucket, arrivals] : buckets_) {
        const double h = held(order, bucket.first);
        const int cls = bucket.second;
        size_t taken = 0;
        arrivals.for_each([&](const Key& key, const TimePoint& since) {
            if (taken++ == n)
                return false;
            candidates.push_back({position(order, cls, h, key, since), key.second});
            return true;
        });
    }
    std::sort(candidates.begin(), candidates.end());
    for (size_t i = 0; i < candidates.size() && i < n; ++i)
        ids.push_back(candidates[i].second);
    return ids;
}

std::vector<ClientId> WaitingLine::all(const LineOrder& order) const
{
    std::vector<ClientId> ids;
    ids.reserve(size_);
    if (buckets_.size() <= 1) {
        for_each([&](ClientId id) { ids.push_back(id); });
        return ids;
    }
    // Each bucket is in order already: merged, not sorted.
    std::vector<std::vector<std::pair<Position, ClientId>>> lists;
    for (const auto& [bucket, arrivals] : buckets_) {
        const double h = held(order, bucket.first);
        const int cls = bucket.second;
        auto& list = lists.emplace_back();
        list.reserve(arrivals.size());
        arrivals.for_each([&](const Key& key, const TimePoint& since) {
            list.push_back({position(order, cls, h, key, since), key.second});
            return true;
        });
    }
    using Cursor = std::pair<Position, std::pair<size_t, size_t>>;  // (at, (list, index))
    std::priority_queue<Cursor, std::vector<Cursor>, std::greater<>> next;
    for (size_t l = 0; l < lists.size(); ++l)
        next.push({lists[l][0].first, {l, 0}});
    while (!next.empty()) {
        const auto [l, i] = next.top().second;
        next.pop();
        ids.push_back(lists[l][i].second);
        if (i + 1 < lists[l].size())
            next.push({lists[l][i + 1].first, {l, i + 1}});
    }
    return ids;
}

uint32_t WaitingLine::place(const LineOrder& order, const ClientRecord& c) const
{
    const Bucket own = bucket_of(c);
    const Key key{c.sequence, c.id};
    size_t ahead = 0;
    if (buckets_.size() == 1) {
        ahead = buckets_.begin()->second.rank(key);
    } else {
        const Position at =
            position(order, own.second, held(order, own.first), key, c.waiting_since);
        for (const auto& [bucket, arrivals] : buckets_) {
            if (bucket == own) {
                ahead += arrivals.rank(key);
                continue;
            }
            // In a bucket the order is arrival's: those ahead are a prefix.
            const double h = held(order, bucket.first);
            const int cls = bucket.second;
            ahead += arrivals.prefix_while([&](const Key& k, const TimePoint& since) {
                return position(order, cls, h, k, since) < at;
            });
        }
    }
    return static_cast<uint32_t>(ahead + 1);
}

int WaitingLine::rank(const LineOrder& order, const ClientRecord& c) const
{
    return policy::waiting_rank(c.info.priority, order.now - c.waiting_since, order.aging);
}

WaitingLine::Position WaitingLine::position_of(const LineOrder& order, const ClientRecord& c) const
{
    const Bucket own = bucket_of(c);
    return position(order, own.second, held(order, own.first), {c.sequence, c.id}, c.waiting_since);
}

int WaitingLine::best_class() const
{
    int best = INT32_MAX;
    for (const auto& [bucket, arrivals] : buckets_)
        best = std::min(best, bucket.second);
    return best;
}

}  // namespace nvshare::daemon
