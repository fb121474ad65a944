#include "preload/lock/idle_gaps.h"

namespace nvshare::preload {

void IdleGaps::idle_since(uint64_t t)
{
    if (idle_)
        return;
    idle_ = true;
    idle_from_ = t;
}

void IdleGaps::resumed(uint64_t t)
{
    if (!idle_)
        return;
    idle_ = false;
    gaps_[next_] = t > idle_from_ ? t - idle_from_ : 0;
    next_ = (next_ + 1) % kRemembered;
    if (count_ < kRemembered)
        ++count_;
}

bool IdleGaps::long_seen(uint64_t ski) const
{
    for (size_t i = 0; i < count_; ++i)
        if (gaps_[i] > ski)
            return true;
    return false;
}

uint64_t IdleGaps::longest_recent_short(uint64_t ski) const
{
    // The latest kRecentShort pauses, then on back to the latest long one.
    uint64_t longest = 0;
    bool burst_ended = false;
    for (size_t k = 1; k <= count_; ++k) {
        const uint64_t gap = gaps_[(next_ + kRemembered - k) % kRemembered];
        if (k > kRecentShort && (burst_ended || gap > ski))
            break;
        if (gap > ski)
            burst_ended = true;
        else if (gap > longest)
            longest = gap;
    }
    return longest;
}

uint64_t IdleGaps::hold_for(uint64_t switch_share_ns, uint64_t period_ns) const
{
    const uint64_t ski = ski_rental(switch_share_ns, period_ns);
    if (!long_seen(ski))
        return ski;
    // Pauses that outlasted the short ones have all been long: wait out the
    // short ones (with a margin, and at least the floor), then let go.
    const uint64_t twice = 2 * longest_recent_short(ski);
    const uint64_t wait = twice > kShortHoldFloorNs ? twice : kShortHoldFloorNs;
    return wait < ski ? wait : ski;
}

}  // namespace nvshare::preload
