// When an idle holder that others wait for hands the GPU on: the client
// thread's idle checks (client.cpp's release_if_idle) as pure logic, times
// in (CLOCK_MONOTONIC ns), a step out. How long to keep the GPU idle first
// (`hold`) is IdleGaps' and the switch policy's call; this decides when to
// look, when the pause began, and when to let go.
//
// A pause is timed from when the work ran out, not from the look that let
// go: measured from the end of a long hold it reads short, and one such
// reading kept holders waiting out every later pause. Work still running at
// the drain means the GPU has been idle only from the drain's end. Letting
// go in a pause, the holder asks for the GPU again only when its work
// resumes: a wish for the lock left from the grant's swap-in (the program's
// calls waited at the gate and asked again) is stale once the gate closes
// idle. Kept, it asked again at once, mid-pause, and the pause read as none.
#pragma once

#include <cstdint>

#include "preload/swap/tuning.h"

namespace nvshare::preload::idle_release {

// How often a holder that lets go sooner than the idle period looks whether
// its work ran out: the end of its burst is seen when it comes, not up to
// two periods later.
inline constexpr uint64_t kQuickCheckNs = 2 * tuning::kMs;
// A drain that takes longer than this found GPU work still in flight.
inline constexpr uint64_t kInFlightNs = 1 * tuning::kMs;

// What an idle check sees.
struct Look {
    uint64_t now = 0;
    uint64_t period = 0;       // the idle period (> 0)
    uint64_t hold = 0;         // how long to keep the GPU idle before letting go
    uint64_t quiet_since = 0;  // no work submitted since
    bool capturing = false;    // a stream capture runs: never release (and sync) in it
    bool active = false;       // work was submitted since quiet_since
};

enum class Step {
    Wait,     // nothing to do before next_look
    Resumed,  // work came: a pause we let go in ends at the work's time; quiet from now
    Drain,    // idle for the hold: drain the work, then after_drain()
};

struct Decision {
    Step step = Step::Wait;
    uint64_t next_look = 0;
};

Decision look(const Look& l);

// A drain begun at the look `l` ended at `drained` with no work submitted
// meanwhile.
struct AfterDrain {
    uint64_t idle_from = 0;  // where the pause began (IdleGaps::idle_since)
    bool release = false;    // let go now (if the gate closes idle)
    // With release: drop the wish for the lock before closing the gate. No
    // call waits at a gate that closes idle, so a wish left from earlier
    // (the grant's swap-in) is stale: the next comes from work that resumes.
    bool forget_wish = false;
    uint64_t idle_ns = 0;      // with release: how long the GPU was idle
    uint64_t quiet_since = 0;  // without release: quiet from then on
    uint64_t next_look = 0;    // without release
};

AfterDrain after_drain(const Look& l, uint64_t drained);

}  // namespace nvshare::preload::idle_release
