#include "preload/idle_gaps.h"

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

uint64_t IdleGaps::hold_for(uint64_t switch_cost_ns, uint64_t period_ns) const
{
    const uint64_t ski = switch_cost_ns > period_ns ? switch_cost_ns : period_ns;
    if (count_ == 0)
        return ski;
    for (size_t i = 0; i < count_; ++i)
        if (gaps_[i] <= ski)
            return ski;
    return 0;
}

}  // namespace nvshare::preload
