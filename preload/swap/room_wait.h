// How long a swap-in at a grant waits for device room that the previous
// holder still gives back (residency's engine_swap_in): rounds of placement
// are tried again while the room grows and a while after, and the round
// that starts once the room has not grown for the patience is the last:
// what still finds no room then goes to host memory. Pure logic on the
// caller's clock (tuning.h: kRoomPollFastNs, kRoomPollNs, kRoomWaitMaxNs).
#pragma once

#include <cstdint>

namespace nvshare::preload::swap {

class RoomWait {
public:
    // After the first round, at `now`: `left` bytes found no room; the room
    // may stay the same for `patience` ns (0: no wait, that round was the
    // last).
    RoomWait(uint64_t now, uint64_t patience, uint64_t left);

    // Whether another round follows (while some memory still finds no room).
    bool waiting() const { return waiting_; }
    // Whether a round that starts at `now` is the last.
    bool last(uint64_t now) const { return now >= until_; }
    // How long to pause before a round that is not the last: short while
    // the room grows.
    uint64_t pause_ns() const;
    // A round begun as `last` (from last()) ended at `now` with `left` bytes
    // still without room: fewer than before is growth, which waits on for
    // the patience from now, but no longer than kRoomWaitMaxNs from the
    // first round.
    void round_done(bool last, uint64_t left, uint64_t now);

private:
    uint64_t first_, patience_, until_, left_;
    bool grew_ = true, waiting_;
};

}  // namespace nvshare::preload::swap
