// Host memory made ahead on a thread of its own. The client thread says
// what a swap-out will need (a wish: for each GPU, the bytes that stay and
// the order in which to make the rest); the maker thread makes it a step at
// a time (swappable::prestage) while the client thread goes on answering
// nvshared: a Shrink is carried out at once rather than after the step in
// hand, and its copies run while the next step is made.
//
// What the maker may do (preload/README.md, the invariant): make pinned
// host memory and give it to chunks that have none, under the engine's
// lock. It never copies, maps or unmaps device memory, so it never moves
// memory under running work.
#pragma once

#include <cstdint>

#include "preload/memory/devices.h"
#include "preload/swap/swappable.h"

namespace nvshare::preload::maker {

struct Wish {
    uint64_t gpus = 0;                      // devices:: indices; none: stop after the step in hand
    uint64_t keep[devices::kMaxGpus] = {};  // what a swap-out keeps there
    swappable::MakeOrder order = swappable::MakeOrder::LeavingFirst;
    bool operator==(const Wish&) const = default;
};

// Client thread: make host memory for `w`, replacing the wish before (the
// maker takes it at the end of its step in hand). True while the maker is
// still at it; false once it found nothing more to make (or could not make
// it: the swap-outs then make what they need), said once: a later call
// with the same wish looks again (memory may have changed since). The
// maker pokes the client thread (mailbox::poke) when it is done.
bool want(const Wish& w);

// Client thread: no more host memory made ahead until the next want() (a
// swap-in or a release is about to move memory: its own making, or the
// copies, come first).
void stop();

// In a fork()ed child: no maker thread, no wish.
void reset_after_fork();

}  // namespace nvshare::preload::maker
