// What this process's pauses in GPU work have lasted, to decide how long an
// idle holder keeps the lock while others wait. Pure logic: times in, a
// decision out (CLOCK_MONOTONIC nanoseconds).
//
// Without a history the rule is ski-rental: stay idle as long as our share
// of a switch would cost (at least the configured idle period), then let go;
// that is never worse than twice the best choice in hindsight. Our share,
// not the whole round trip: our pause hides the next holder's work, and its
// pause (or the end of its quantum, a switch that comes anyway) pays for
// the way back. With a history, a
// process whose long pauses outlast that is bursty in a way worth exploiting:
// once it has been idle longer than its short pauses (the gaps between the
// steps of a burst) last, the pause is a long one, and it lets go then
// rather than leave the GPU idle for a switch cost on every pause. How
// long the short pauses last is read from the current burst (the pauses
// since the latest long one) and at least the latest two: those of a
// start-up (allocations that waited for room, a first fill) are not the
// steady pattern, and one of them kept every later pause waiting out a
// whole switch cost; but a short pause the holder let go in, wrongly, must
// hold for the rest of its burst, not for two pauses.
#pragma once

#include <cstddef>
#include <cstdint>

#include "preload/swap/tuning.h"

namespace nvshare::preload {

class IdleGaps {
public:
    static constexpr size_t kRemembered = 16;
    // Short pauses count from the current burst (since the latest long
    // pause) and at least the latest this many pauses: in a pattern of
    // bursts of two steps or more, no two long pauses come one after the
    // other, so any two consecutive pauses hold a short one. The burst
    // matters in a phase of many quick reads (a check after the last step):
    // their 0 ms pauses pushed a 19 ms pause the holder had wrongly let go
    // in out of the latest two, and it let go again at the next one.
    static constexpr size_t kRecentShort = 2;
    // The least an idle holder waits once its pauses have proved long, and
    // how often, at least, it looks again while others wait (tuning.h).
    static constexpr uint64_t kShortHoldFloorNs = tuning::kShortHoldFloorNs;
    static constexpr uint64_t kPauseLookNs = tuning::kPauseLookNs;

    // The GPU is idle since `t` with nothing submitted after it. Later calls
    // in the same pause keep the earliest time.
    void idle_since(uint64_t t);
    // Work was submitted at `t`: the pause (if one was seen) ends and is
    // remembered.
    void resumed(uint64_t t);
    bool idle() const { return idle_; }
    uint64_t idle_from() const { return idle_from_; }  // while idle()

    // How long an idle holder keeps the lock before letting go: the ski
    // rental's max(period, our share of a switch); but when some remembered pause
    // outlasted that, twice the longest of the latest shorter ones (at least
    // kShortHoldFloorNs), if that is less.
    uint64_t hold_for(uint64_t switch_share_ns, uint64_t period_ns) const;
    // The ski rental's wait: max(period, our share of a switch).
    static uint64_t ski_rental(uint64_t switch_share_ns, uint64_t period_ns)
    {
        return switch_share_ns > period_ns ? switch_share_ns : period_ns;
    }
    // When an idle holder looks next, given the look it planned: no later
    // than kPauseLookNs (or the period, if shorter) from now. A look planned
    // at the end of a long hold (one that counts host memory still to be
    // made) fell inside the next pause, which was then timed from that look
    // rather than from where it began.
    static uint64_t next_look(uint64_t now, uint64_t planned, uint64_t period_ns)
    {
        const uint64_t step = period_ns < kPauseLookNs ? period_ns : kPauseLookNs;
        return planned < now + step ? planned : now + step;
    }
    // Its inputs, also for the debug log: whether a remembered pause
    // outlasted `ski`, and the longest pause that did not, of the current
    // burst and the latest kRecentShort (0 if none).
    bool long_seen(uint64_t ski) const;
    uint64_t longest_recent_short(uint64_t ski) const;

    size_t remembered() const { return count_; }

private:
    uint64_t gaps_[kRemembered] = {};
    size_t count_ = 0;
    size_t next_ = 0;
    uint64_t idle_from_ = 0;
    bool idle_ = false;
};

}  // namespace nvshare::preload
