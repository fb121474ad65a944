#include "preload/lock/idle_release.h"

#include "preload/lock/idle_gaps.h"

namespace nvshare::preload::idle_release {

Decision look(const Look& l)
{
    // A process that lets go sooner than the period is watched closely.
    const uint64_t step = l.hold < l.period && l.period > kQuickCheckNs ? kQuickCheckNs : l.period;
    const uint64_t next = IdleGaps::next_look(l.now, l.now + step, l.period);
    if (l.capturing)
        return {Step::Wait, next};
    if (l.active)
        return {Step::Resumed, next};
    if (l.now - l.quiet_since < l.hold)
        return {Step::Wait, IdleGaps::next_look(l.now, l.quiet_since + l.hold, l.period)};
    return {Step::Drain, next};
}

AfterDrain after_drain(const Look& l, uint64_t drained)
{
    AfterDrain a;
    const bool was_busy = drained - l.now > kInFlightNs;
    a.idle_from = was_busy ? drained : l.quiet_since;
    if (was_busy && l.hold != 0) {
        a.quiet_since = drained;
        a.next_look = IdleGaps::next_look(drained, drained + l.hold, l.period);
        return a;
    }
    a.release = true;
    a.forget_wish = true;
    a.idle_ns = was_busy ? 0 : drained - l.quiet_since;
    return a;
}

}  // namespace nvshare::preload::idle_release
