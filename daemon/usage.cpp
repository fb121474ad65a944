#include "daemon/usage.h"

#include <algorithm>
#include <vector>

#include "daemon/client.h"

namespace nvshare::daemon {

Duration held_so_far(const ClientRecord& c, TimePoint now)
{
    return c.phase == Phase::Holding ? c.held_total + (now - c.granted_at) : c.held_total;
}

Duration waited_so_far(const ClientRecord& c, TimePoint now)
{
    return c.phase == Phase::Waiting ? c.waited_total + (now - c.waiting_since) : c.waited_total;
}

void Usage::add(const Usage& o)
{
    held += o.held;
    waited += o.waited;
    grants += o.grants;
    drops += o.drops;
    revocations += o.revocations;
    bytes_swapped_in += o.bytes_swapped_in;
    bytes_swapped_out += o.bytes_swapped_out;
    swap_in_time += o.swap_in_time;
    swap_out_time += o.swap_out_time;
    clients += o.clients;
    waiting += o.waiting;
}

namespace {

// What one client adds on one of its GPUs. A client's holds and waits cover
// all the GPUs it named (libnvshare.so asks for them together), so its
// times and counts go to each of them; swaps are reported per GPU.
Usage contribution(const ClientRecord& c, GpuIndex g, TimePoint now)
{
    Usage u;
    u.held = held_so_far(c, now);
    u.waited = waited_so_far(c, now);
    u.grants = c.grants;
    u.drops = c.drops;
    u.revocations = c.revocations;
    if (const auto it = c.swaps.find(g); it != c.swaps.end()) {
        u.bytes_swapped_in = it->second.bytes_prefetched;
        u.bytes_swapped_out = it->second.bytes_evicted;
        u.swap_in_time = it->second.swap_in_time;
        u.swap_out_time = it->second.swap_out_time;
    }
    return u;
}

}  // namespace

void UsageLedger::joined(const ClientRecord& c)
{
    live_[c.info.principal]++;
}

void UsageLedger::retire(const ClientRecord& c, TimePoint now)
{
    for (GpuIndex g : c.gpus) {
        Record& r = retired_[{g, c.info.principal}];
        r.usage.add(contribution(c, g, now));
        r.last_retired = now;
    }
    expire(now);  // its user is still present
    if (const auto it = live_.find(c.info.principal); it != live_.end() && --it->second == 0)
        live_.erase(it);
}

void UsageLedger::expire(TimePoint now)
{
    std::vector<std::pair<TimePoint, UsageKey>> idle;
    for (auto it = retired_.begin(); it != retired_.end();) {
        if (live_.contains(it->first.uid)) {
            ++it;
        } else if (now - it->second.last_retired > kUsageKeep) {
            it = retired_.erase(it);
        } else {
            idle.emplace_back(it->second.last_retired, it->first);
            ++it;
        }
    }
    if (retired_.size() <= kMaxUsageRecords)
        return;
    std::sort(idle.begin(), idle.end());
    for (size_t i = 0; i < idle.size() && retired_.size() > kMaxUsageRecords; ++i)
        retired_.erase(idle[i].second);
}

std::map<UsageKey, Usage> UsageLedger::totals(const std::map<ClientId, ClientRecord>& live,
                                              TimePoint now) const
{
    std::map<UsageKey, Usage> totals;
    for (const auto& [key, r] : retired_)
        totals[key] = r.usage;
    for (const auto& [id, c] : live) {
        for (GpuIndex g : c.gpus) {
            Usage u = contribution(c, g, now);
            u.clients = 1;
            u.waiting = c.phase == Phase::Waiting && (c.wanted & gpu_bit(g)) != 0 ? 1 : 0;
            totals[{g, c.info.principal}].add(u);
        }
    }
    return totals;
}

}  // namespace nvshare::daemon
