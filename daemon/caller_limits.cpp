#include "daemon/caller_limits.h"

#include <iterator>

namespace nvshare::daemon {

bool CallerLimits::idle(Caller& c, Clock::time_point now)
{
    // A count of left-out refusals goes with it: it only ever reaches the
    // log on a later refusal's line.
    return c.pending == 0 && now - c.log.logged_at >= kRefusalLogInterval && c.refusals.full(now);
}

CallerLimits::Caller* CallerLimits::entry(uid_t uid, Clock::time_point now)
{
    if (auto it = callers_.find(uid); it != callers_.end())
        return &it->second;
    if (callers_.size() >= kMaxCallers) {
        for (auto it = callers_.begin(); it != callers_.end();)
            it = idle(it->second, now) ? callers_.erase(it) : std::next(it);
    }
    if (callers_.size() >= kMaxCallers)
        return nullptr;
    return &callers_[uid];
}

CallerLimits::Admission CallerLimits::admit(uid_t uid, Clock::time_point now)
{
    Caller* c = entry(uid, now);
    if (c == nullptr)
        return Admission::TooManyPending;
    if (!c->refusals.available(now))
        return Admission::RefusedTooOften;
    if (c->pending >= kPendingPerCaller || pending_ >= kPendingInAll)
        return Admission::TooManyPending;
    ++c->pending;
    ++pending_;
    return Admission::Ask;
}

void CallerLimits::finished(uid_t uid, bool refused, Clock::time_point now)
{
    auto it = callers_.find(uid);
    if (it == callers_.end())
        return;  // admit() made it; only a mismatched call gets here
    if (it->second.pending > 0) {
        --it->second.pending;
        --pending_;
    }
    if (refused)
        it->second.refusals.take(now);
}

void CallerLimits::refused_without_asking(uid_t uid, Clock::time_point now)
{
    if (Caller* c = entry(uid, now))
        c->refusals.take(now);
}

CallerLimits::Clock::duration CallerLimits::retry_after(uid_t uid, Clock::time_point now)
{
    auto it = callers_.find(uid);
    return it == callers_.end() ? Clock::duration::zero() : it->second.refusals.wait(now);
}

bool CallerLimits::log_refusal(uid_t uid, Clock::time_point now, uint64_t* left_out)
{
    Caller* c = entry(uid, now);
    if (c == nullptr)
        return false;  // the table is full: such a flood is not logged per caller
    return c->log.due(now, kRefusalLogInterval, left_out);
}

}  // namespace nvshare::daemon
