#include "daemon/soft_followers.h"

#include "daemon/turn_policy.h"

namespace nvshare::daemon {

SoftFollowers::Bucket SoftFollowers::bucket_of(const ClientRecord& c)
{
    return {c.info.principal, policy::class_rank(c.info.priority)};
}

void SoftFollowers::follow(ClientRecord& c, GpuIndex gpu, Deadlines& deadlines)
{
    const std::optional<TimePoint> at = at_;
    set_at(std::nullopt, deadlines);  // their entry moves if `c` comes first
    ids_.insert(c.id);
    by_bucket_[bucket_of(c)].insert({c.sequence, c.id});
    loose_.erase(c.id);
    others_.erase(c.id);
    c.follows = gpu;
    set_at(at, deadlines);
}

void SoftFollowers::unfollow(ClientRecord& c, bool still_waiting, Deadlines& deadlines)
{
    const std::optional<TimePoint> at = at_;
    set_at(std::nullopt, deadlines);
    ids_.erase(c.id);
    if (const auto it = by_bucket_.find(bucket_of(c)); it != by_bucket_.end()) {
        it->second.erase({c.sequence, c.id});
        if (it->second.empty())
            by_bucket_.erase(it);
    }
    others_.insert(c.id);
    if (still_waiting)
        loose_.insert(c.id);
    c.follows.reset();
    set_at(at, deadlines);
    deadlines.set(c, at);  // it had none of its own
}

void SoftFollowers::set_at(std::optional<TimePoint> at, Deadlines& deadlines)
{
    if (at_ && !empty())
        deadlines.remove({*at_, first()});
    at_ = at;
    if (at_ && !empty())
        deadlines.add({*at_, first()});
}

void SoftFollowers::set_pending(ClientRecord& c, std::pair<GpuIndex, TimePoint> pending,
                                std::optional<TimePoint> deadline)
{
    if (!c.pending) {
        pending_.insert({pending.second, c.id});
        loose_.erase(c.id);
        others_.erase(c.id);
        c.pending = pending;
    }
    if (deadline != pending.second)
        driven_.insert(c.id);
    else
        driven_.erase(c.id);
}

void SoftFollowers::clear_pending(ClientRecord& c, bool still_waiting)
{
    pending_.erase({c.pending->second, c.id});
    driven_.erase(c.id);
    others_.insert(c.id);
    if (still_waiting)
        loose_.insert(c.id);
    c.pending.reset();
}

std::vector<ClientId> SoftFollowers::to_update(TimePoint upto) const
{
    std::vector<ClientId> ids(driven_.begin(), driven_.end());
    for (const auto& [bound, id] : pending_) {
        if (bound > upto)
            break;
        ids.push_back(id);
    }
    return ids;
}

void SoftFollowers::disband(std::map<ClientId, ClientRecord>& clients, Deadlines& deadlines)
{
    while (!empty())
        unfollow(clients.at(first()), true, deadlines);
    while (!pending_.empty())
        clear_pending(clients.at(pending_.begin()->second), true);
}

}  // namespace nvshare::daemon
