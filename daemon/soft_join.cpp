#include "daemon/soft_join.h"

#include <algorithm>
#include <tuple>

#include "daemon/turn_policy.h"

namespace nvshare::daemon::soft_join {

TimePoint settled_time(const ClientRecord& c)
{
    return c.first_granted_at ? policy::settled_at(*c.first_granted_at, c.grew_at)
                              : TimePoint::max();
}

TimePoint holders_settled(const Turn& t)
{
    TimePoint settled{};
    for (ClientId h : t.holders)
        settled = std::max(settled, settled_time(t.clients.at(h)));
    return settled;
}

TimePoint policy_join_time(const ClientRecord& c, const Turn& t, Duration quantum, TimePoint now)
{
    std::vector<policy::HolderBurst> holders;
    if (policy::join_reads_holders(c.info.priority, c.burst))
        for (ClientId h : t.holders) {
            const ClientRecord& o = t.clients.at(h);
            holders.push_back({o.burst, now - o.granted_at});
        }
    return c.waiting_since +
           policy::join_after(c.info.priority, c.burst, now - c.waiting_since, holders, quantum);
}

TimePoint join_time(const ClientRecord& c, const Turn& t, Duration quantum, TimePoint now)
{
    TimePoint settled{};  // when the holders that are still starting have settled
    if (c.info.priority != Priority::Interactive && starting(c, now))
        settled = holders_settled(t);
    return std::max(settled, policy_join_time(c, t, quantum, now));
}

size_t share_cap(uint32_t uid, const Turn& t)
{
    std::map<uint32_t, size_t> others;
    for (ClientId h : t.holders) {
        const uint32_t u = t.clients.at(h).info.principal;
        if (u != uid)
            others[u]++;
    }
    t.line.for_each_bucket([&](uint32_t principal, int) {
        if (principal != uid)
            others.emplace(principal, 0);
    });
    return policy::user_share_cap(others);
}

bool user_may_join(uint32_t uid, const Turn& t)
{
    size_t mine = 0;
    for (ClientId h : t.holders)
        mine += t.clients.at(h).info.principal == uid;
    return mine < share_cap(uid, t);
}

bool may_join(const ClientRecord& c, const Turn& t, Duration quantum, TimePoint now)
{
    return join_time(c, t, quantum, now) <= now && user_may_join(c.info.principal, t);
}

bool over_share(const ClientRecord& c, const Turn& t)
{
    size_t before = 0;
    for (ClientId h : t.holders) {
        const ClientRecord& o = t.clients.at(h);
        before += o.id != c.id && o.info.principal == c.info.principal &&
                  std::tie(o.granted_at, o.id) < std::tie(c.granted_at, c.id);
    }
    return before >= share_cap(c.info.principal, t);
}

std::optional<TimePoint> followers_due(const Turn& t, TimePoint now)
{
    const TimePoint settled = holders_settled(t);
    return settled > now ? std::optional<TimePoint>(settled) : std::nullopt;
}

bool followers_may_start(const Turn& t, TimePoint now)
{
    return t.holders.empty() || !followers_due(t, now);
}

bool group_open(const Turn& t, TimePoint short_of_room_until, TimePoint now)
{
    for (ClientId h : t.holders)
        if (starting(t.clients.at(h), now) || t.clients.at(h).drop_sent)
            return false;
    return now >= short_of_room_until;
}

}  // namespace nvshare::daemon::soft_join
