// How much of a swappable claim counts for others (claim_grace.h), on a
// fake clock.
#include "daemon/claim_grace.h"

#include <gtest/gtest.h>

#include "tests/support/sizes.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

using nvshare::test::GiB;
const TimePoint at0{std::chrono::seconds(1000)};

TEST(ClaimGrace, WhatTheHostConfirmsCountsWithoutAGrace)
{
    ClaimGrace g;
    EXPECT_EQ(g.counted(4 * GiB, 4 * GiB, at0), 4 * GiB);
    EXPECT_EQ(g.counted(4 * GiB, 9 * GiB, at0), 4 * GiB);  // never more than claimed
    EXPECT_FALSE(g.ends());
}

TEST(ClaimGrace, AnUnconfirmedIncreaseCountsForTheGraceThenNoMore)
{
    ClaimGrace g;
    EXPECT_EQ(g.counted(12 * GiB, GiB, at0), 12 * GiB);
    EXPECT_EQ(g.ends(), at0 + kClaimGrace);
    EXPECT_EQ(g.counted(12 * GiB, GiB, at0 + kClaimGrace - 1ns), 12 * GiB);
    EXPECT_EQ(g.counted(12 * GiB, GiB, at0 + kClaimGrace), GiB);
    EXPECT_FALSE(g.ends());
    EXPECT_EQ(g.owed(), 12 * GiB);
    // The host confirms more of it later: that much counts.
    EXPECT_EQ(g.counted(12 * GiB, 5 * GiB, at0 + 20s), 5 * GiB);
}

// A liar gets one grace: growing again, or dropping its claim and claiming
// again, starts none while the host has not confirmed the last one's.
TEST(ClaimGrace, NoNewGraceUntilTheHostConfirmedTheLastOnesClaim)
{
    ClaimGrace g;
    EXPECT_EQ(g.counted(8 * GiB, 0, at0), 8 * GiB);
    EXPECT_EQ(g.counted(12 * GiB, 0, at0 + 1s), 12 * GiB);  // within the grace
    EXPECT_EQ(g.counted(12 * GiB, 0, at0 + kClaimGrace), 0u);
    EXPECT_EQ(g.counted(16 * GiB, 0, at0 + 20s), 0u);
    EXPECT_EQ(g.counted(0, 0, at0 + 21s), 0u);
    EXPECT_EQ(g.counted(16 * GiB, 0, at0 + 22s), 0u);
    EXPECT_FALSE(g.ends());
    // The host confirms some, but not all the grace covered: still none.
    EXPECT_EQ(g.counted(16 * GiB, 8 * GiB, at0 + 23s), 8 * GiB);
    EXPECT_FALSE(g.ends());
    EXPECT_EQ(g.counted(16 * GiB, 12 * GiB, at0 + 24s), 16 * GiB);  // all it covered: a new one
    EXPECT_EQ(g.ends(), at0 + 24s + kClaimGrace);
}

// An honest process's growth, placed and confirmed within each grace, gets
// a grace at every step.
TEST(ClaimGrace, ConfirmedGrowthGetsAGraceAtEveryStep)
{
    ClaimGrace g;
    TimePoint now = at0;
    for (uint64_t gib = 1; gib <= 8; ++gib, now += 2s) {
        EXPECT_EQ(g.counted(gib * GiB, (gib - 1) * GiB, now), gib * GiB) << gib;
        EXPECT_EQ(g.counted(gib * GiB, gib * GiB, now + 1s), gib * GiB) << gib;
        EXPECT_EQ(g.owed(), 0u) << gib;
    }
    // Long after its last grace, all of it still counts: the host confirms it.
    EXPECT_EQ(g.counted(8 * GiB, 8 * GiB, now + 60s), 8 * GiB);
}

// A newcomer's memory waits for its turn where the host cannot see it: the
// grace lasts while it waits and kClaimGrace from its grant, but only for
// that first turn; leaving the line ends the extension too.
TEST(ClaimGrace, AGraceOutlastsTheFirstWaitAndTurnOnly)
{
    ClaimGrace g;
    EXPECT_EQ(g.counted(12 * GiB, 0, at0, ClaimTurn::Waits), 12 * GiB);
    EXPECT_EQ(g.counted(12 * GiB, 0, at0 + 40s, ClaimTurn::Waits), 12 * GiB);
    EXPECT_EQ(g.counted(12 * GiB, 0, at0 + 50s, ClaimTurn::Granted), 12 * GiB);
    EXPECT_EQ(g.ends(), at0 + 50s + kClaimGrace);
    EXPECT_EQ(g.counted(12 * GiB, 0, at0 + 60s, ClaimTurn::Waits), 12 * GiB);  // a second wait
    EXPECT_EQ(g.ends(), at0 + 50s + kClaimGrace);
    EXPECT_EQ(g.counted(12 * GiB, 0, at0 + 50s + kClaimGrace, ClaimTurn::Granted), 0u);

    ClaimGrace left;
    EXPECT_EQ(left.counted(12 * GiB, 0, at0, ClaimTurn::Waits), 12 * GiB);
    EXPECT_EQ(left.counted(12 * GiB, 0, at0 + 10s, ClaimTurn::Waits), 12 * GiB);
    left.left_line();
    EXPECT_EQ(left.counted(12 * GiB, 0, at0 + 20s, ClaimTurn::Waits), 12 * GiB);
    EXPECT_EQ(left.ends(), at0 + 10s + kClaimGrace);
    EXPECT_EQ(left.counted(12 * GiB, 0, at0 + 10s + kClaimGrace, ClaimTurn::Waits), 0u);
}

}  // namespace
