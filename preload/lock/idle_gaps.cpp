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

uint64_t IdleGaps::hold_for(uint64_t switch_share_ns, uint64_t period_ns) const
{
    const uint64_t ski = switch_share_ns > period_ns ? switch_share_ns : period_ns;
    bool long_seen = false;
    uint64_t longest_short = 0;
    for (size_t i = 0; i < count_; ++i) {
        if (gaps_[i] > ski)
            long_seen = true;
        else if (gaps_[i] > longest_short)
            longest_short = gaps_[i];
    }
    if (!long_seen)
        return ski;
    // Pauses that outlasted the short ones have all been long: wait out the
    // short ones (with a margin), then let go.
    const uint64_t wait = 2 * longest_short;
    return wait < ski ? wait : ski;
}

}  // namespace nvshare::preload
