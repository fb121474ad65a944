#include "preload/swap/room_wait.h"

#include "preload/swap/tuning.h"

namespace nvshare::preload::swap {

RoomWait::RoomWait(uint64_t now, uint64_t patience, uint64_t left)
    : first_(now), patience_(patience), until_(now + patience), left_(left), waiting_(patience != 0)
{
}

uint64_t RoomWait::pause_ns() const
{
    return grew_ ? tuning::kRoomPollFastNs : tuning::kRoomPollNs;
}

void RoomWait::round_done(bool last, uint64_t left, uint64_t now)
{
    grew_ = left < left_;
    left_ = left;
    if (grew_) {
        const uint64_t later = now + patience_;
        const uint64_t cap = first_ + tuning::kRoomWaitMaxNs;
        until_ = later < cap ? later : cap;
    }
    waiting_ = !last;
}

}  // namespace nvshare::preload::swap
