#include "daemon/turn_policy.h"

#include <algorithm>
#include <cmath>

namespace nvshare::daemon::policy {

namespace {

double seconds(TimePoint t)
{
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

int class_rank(Priority p)
{
    switch (p) {
        case Priority::Interactive:
            return 0;
        case Priority::Batch:
            return 2;
        case Priority::Normal:
        case Priority::Unset:
            break;
    }
    return 1;
}

int waiting_rank(Priority p, Duration waited, Duration aging)
{
    return aged_rank(class_rank(p), waited, aging);
}

int aged_rank(int rank, Duration waited, Duration aging)
{
    if (aging <= Duration::zero() || waited <= Duration::zero())
        return rank;
    const auto raised = waited / aging;
    return raised >= rank ? 0 : rank - static_cast<int>(raised);
}

Duration preempted_quantum(Duration quantum, Priority holder, int best_waiting)
{
    const int own = class_rank(holder);
    if (best_waiting >= own)
        return quantum;
    // An interactive waiter cuts it short; a normal one ahead of a batch
    // holder takes a quarter off the wait.
    return std::min(quantum, best_waiting == 0 ? kInteractivePreempt : quantum / 4);
}

Duration next_burst_estimate(Duration current, Duration sample)
{
    if (sample < Duration::zero())
        return current;
    if (current <= Duration::zero())
        return sample;
    // Recent bursts count most, but one odd burst does not swing it.
    return (current * 3 + sample) / 4;
}

TimePoint settled_at(TimePoint first_grant, std::optional<TimePoint> last_growth)
{
    // One that has not allocated yet is still creating its context.
    if (!last_growth)
        return first_grant + kStartupWindow;
    const TimePoint quiet_from = std::max(first_grant, *last_growth);
    return std::min(first_grant + kStartupWindow, quiet_from + kStartupSettle);
}

Duration join_after(Priority cls, Duration burst, Duration waited,
                    std::span<const HolderBurst> holders, Duration quantum)
{
    if (cls == Priority::Interactive)
        return Duration::zero();
    if (cls == Priority::Batch)
        return quantum;
    if (!join_reads_holders(cls, burst))  // short, or not known yet
        return Duration::zero();
    if (!holders.empty()) {
        // The longest the holders' current burst still runs by their record;
        // one with no record may run for as long as it likes.
        bool unbounded = false;
        Duration left{};
        for (const HolderBurst& h : holders) {
            if (h.burst <= Duration::zero())
                unbounded = true;
            else
                left = std::max(left, h.burst - h.held_for);
        }
        if (unbounded || left > burst)
            return waited;
    }
    return std::min(2 * burst, quantum);
}

bool join_reads_holders(Priority cls, Duration burst)
{
    return cls != Priority::Interactive && cls != Priority::Batch && burst > kShortBurst;
}

size_t user_share_cap(const std::map<uint32_t, size_t>& others)
{
    if (others.empty())
        return SIZE_MAX;
    size_t least = SIZE_MAX;
    for (const auto& [uid, running] : others)
        least = std::min(least, running);
    return std::max<size_t>(1, least);
}

void UserShares::hold_began(uint32_t uid, TimePoint at)
{
    Share& s = shares_[uid];
    s.running++;
    s.running_began_s += seconds(at);
}

void UserShares::hold_ended(uint32_t uid, TimePoint began, TimePoint now)
{
    auto it = shares_.find(uid);
    if (it == shares_.end() || it->second.running == 0)
        return;
    Share& s = it->second;
    s.running--;
    s.running_began_s -= seconds(began);
    if (s.running == 0)
        s.running_began_s = 0;  // no rounding left behind
    const double half_life = std::chrono::duration<double>(kUsageHalfLife).count();
    const double age = std::max(0.0, seconds(now) - seconds(s.at));
    s.decayed_s = s.decayed_s * std::exp2(-age / half_life) +
                  std::max(0.0, std::chrono::duration<double>(now - began).count());
    s.at = now;
}

double UserShares::held(uint32_t uid, TimePoint now) const
{
    auto it = shares_.find(uid);
    if (it == shares_.end())
        return 0;
    const Share& s = it->second;
    const double half_life = std::chrono::duration<double>(kUsageHalfLife).count();
    const double age = std::max(0.0, seconds(now) - seconds(s.at));
    const double running = static_cast<double>(s.running) * seconds(now) - s.running_began_s;
    return s.decayed_s * std::exp2(-age / half_life) + std::max(0.0, running);
}

}  // namespace nvshare::daemon::policy
