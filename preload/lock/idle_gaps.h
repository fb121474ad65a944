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
// rather than leave the GPU idle for a switch cost on every pause.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvshare::preload {

class IdleGaps {
public:
    static constexpr size_t kRemembered = 16;

    // The GPU is idle since `t` with nothing submitted after it. Later calls
    // in the same pause keep the earliest time.
    void idle_since(uint64_t t);
    // Work was submitted at `t`: the pause (if one was seen) ends and is
    // remembered.
    void resumed(uint64_t t);
    bool idle() const { return idle_; }

    // How long an idle holder keeps the lock before letting go: the ski
    // rental's max(period, our share of a switch); but when some remembered pause
    // outlasted that, twice the longest of the shorter ones (0 if none), if
    // that is less.
    uint64_t hold_for(uint64_t switch_share_ns, uint64_t period_ns) const;

    size_t remembered() const { return count_; }

private:
    uint64_t gaps_[kRemembered] = {};
    size_t count_ = 0;
    size_t next_ = 0;
    uint64_t idle_from_ = 0;
    bool idle_ = false;
};

}  // namespace nvshare::preload
