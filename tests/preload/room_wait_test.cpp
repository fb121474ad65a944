// The wait for room at a grant (preload/swap/room_wait.h): when a swap-in
// stops waiting for the room the previous holder gives back and sends what
// still finds none to host memory; on a fake clock.
#include "preload/swap/room_wait.h"

#include <gtest/gtest.h>

#include "preload/swap/tuning.h"

namespace {

using nvshare::preload::swap::RoomWait;
namespace tuning = nvshare::preload::tuning;

constexpr uint64_t kMs = tuning::kMs;
constexpr uint64_t kStart = 1000 * tuning::kSec;  // the fake clock's origin
constexpr uint64_t kChunk = 64ull << 20;

TEST(RoomWait, NoPatienceMeansNoWait)
{
    const RoomWait w(kStart, 0, 4 * kChunk);
    EXPECT_FALSE(w.waiting());
}

// The flake this guards: a releaser that is slow to give back its first
// group (host memory still being made) leaves the next holder with no
// growth; it waits the whole patience before any round is the last.
TEST(RoomWait, WithoutGrowthTheLastRoundComesAfterThePatience)
{
    RoomWait w(kStart, tuning::kRoomWaitNs, 4 * kChunk);
    uint64_t now = kStart;
    while (true) {
        ASSERT_TRUE(w.waiting());
        const bool last = w.last(now);
        EXPECT_EQ(last, now >= kStart + tuning::kRoomWaitNs) << (now - kStart) / kMs << " ms";
        if (!last)
            now += w.pause_ns();
        w.round_done(last, 4 * kChunk, now);  // no room came
        if (last)
            break;
    }
    EXPECT_FALSE(w.waiting());
    EXPECT_GE(now - kStart, tuning::kRoomWaitNs);
    EXPECT_LT(now - kStart, tuning::kRoomWaitNs + 2 * tuning::kRoomPollNs);
}

TEST(RoomWait, GrowthWaitsThePatienceFromTheLastGrowth)
{
    RoomWait w(kStart, tuning::kRoomWaitNs, 4 * kChunk);
    const uint64_t grew_at = kStart + 400 * kMs;
    ASSERT_FALSE(w.last(grew_at));
    w.round_done(false, 3 * kChunk, grew_at);  // one chunk found room
    EXPECT_FALSE(w.last(kStart + tuning::kRoomWaitNs));
    EXPECT_FALSE(w.last(grew_at + tuning::kRoomWaitNs - 1));
    EXPECT_TRUE(w.last(grew_at + tuning::kRoomWaitNs));
    // A round without growth does not extend it.
    w.round_done(false, 3 * kChunk, grew_at + 300 * kMs);
    EXPECT_TRUE(w.last(grew_at + tuning::kRoomWaitNs));
    EXPECT_TRUE(w.waiting());
}

TEST(RoomWait, GrowthNeverWaitsPastTheLimit)
{
    RoomWait w(kStart, tuning::kRoomWaitNs, 1000 * kChunk);
    uint64_t left = 1000 * kChunk, now = kStart;
    for (int round = 0; round < 1000 && !w.last(now); ++round) {
        now += 100 * kMs;
        w.round_done(false, --left, now);  // the room grows at every round
    }
    EXPECT_EQ(now, kStart + tuning::kRoomWaitMaxNs);
}

TEST(RoomWait, PollsFastWhileTheRoomGrows)
{
    RoomWait w(kStart, tuning::kRoomWaitNs, 4 * kChunk);
    EXPECT_EQ(w.pause_ns(), tuning::kRoomPollFastNs);  // the first pause
    w.round_done(false, 4 * kChunk, kStart + 2 * kMs);
    EXPECT_EQ(w.pause_ns(), tuning::kRoomPollNs);
    w.round_done(false, 3 * kChunk, kStart + 22 * kMs);
    EXPECT_EQ(w.pause_ns(), tuning::kRoomPollFastNs);
}

// The shorter patience on a GPU shared with others.
TEST(RoomWait, ASharedHoldWaitsItsOwnPatience)
{
    const RoomWait w(kStart, tuning::kSharedRoomWaitNs, 4 * kChunk);
    EXPECT_FALSE(w.last(kStart + tuning::kSharedRoomWaitNs - 1));
    EXPECT_TRUE(w.last(kStart + tuning::kSharedRoomWaitNs));
}

}  // namespace
