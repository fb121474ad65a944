// The client thread's lock state machine (preload/lock/holding.h): every
// transition the messages from nvshared cause, with deadlines.
#include "preload/lock/holding.h"

#include <gtest/gtest.h>

namespace {

using nvshare::preload::Holding;
using nvshare::preload::HoldState;
namespace proto = nvshare::proto;

proto::GrantPayload grant(uint32_t flags = 0, uint32_t keep_mib = 0)
{
    return proto::GrantPayload{1, flags, keep_mib};
}

proto::DropPayload drop(uint64_t grace_us, uint32_t flags = 0, uint32_t keep_mib = 0)
{
    return proto::DropPayload{1, grace_us, flags, keep_mib};
}

TEST(Holding, StartsIdleWithoutDeadline)
{
    Holding h;
    EXPECT_EQ(h.state(), HoldState::Idle);
    EXPECT_FALSE(h.holds());
    EXPECT_FALSE(h.deadline().has_value());
}

TEST(Holding, RequestThenGrantHolds)
{
    Holding h;
    h.request_sent();
    EXPECT_EQ(h.state(), HoldState::Requested);
    EXPECT_FALSE(h.holds());
    h.granted(grant());
    EXPECT_EQ(h.state(), HoldState::Holding);
    EXPECT_TRUE(h.holds());
    EXPECT_FALSE(h.contended());
    EXPECT_EQ(h.keep_bytes(), 0u);
    EXPECT_FALSE(h.deadline().has_value());
}

TEST(Holding, RequestOnlyFromIdle)
{
    Holding h;
    h.granted(grant());
    h.request_sent();
    EXPECT_EQ(h.state(), HoldState::Holding);
}

TEST(Holding, ContendedGrantKeepsWhatFits)
{
    Holding h;
    h.granted(grant(proto::kGrantContended | proto::kGrantOversubscribed, 3));
    EXPECT_TRUE(h.contended());
    EXPECT_TRUE(h.oversubscribed());
    EXPECT_EQ(h.keep_bytes(), proto::keep_from_wire(3));
}

TEST(Holding, SwapInHoldsTheGateUntilDoneOrOverdue)
{
    Holding h;
    h.granted(grant());
    h.await_swap_in(1000);
    EXPECT_EQ(h.state(), HoldState::SwappingIn);
    EXPECT_TRUE(h.holds());
    EXPECT_EQ(h.deadline(), 1000u);
    EXPECT_FALSE(h.swap_in_over(true, 999));
    EXPECT_EQ(h.state(), HoldState::SwappingIn);
    EXPECT_TRUE(h.swap_in_over(true, 1000));  // overdue
    EXPECT_EQ(h.state(), HoldState::Holding);
    EXPECT_FALSE(h.swap_in_over(false, 1001));  // only once

    Holding done;
    done.granted(grant());
    done.await_swap_in(1000);
    EXPECT_TRUE(done.swap_in_over(false, 10));
    EXPECT_EQ(done.state(), HoldState::Holding);
}

TEST(Holding, DropWhileHoldingDrainsForThreeQuartersOfTheGrace)
{
    Holding h;
    h.granted(grant());
    h.dropped(drop(1000, proto::kGrantOversubscribed, 2), 5000);
    EXPECT_EQ(h.state(), HoldState::Draining);
    EXPECT_TRUE(h.holds());
    EXPECT_EQ(h.deadline(), 5000u + 750u * 1000u);
    EXPECT_TRUE(h.oversubscribed());
    EXPECT_EQ(h.keep_bytes(), proto::keep_from_wire(2));
    // A second drop moves the deadline.
    h.dropped(drop(2000), 6000);
    EXPECT_EQ(h.deadline(), 6000u + 1500u * 1000u);
    h.released();
    EXPECT_EQ(h.state(), HoldState::Idle);
    EXPECT_FALSE(h.deadline().has_value());
}

TEST(Holding, DropCancelsASwapIn)
{
    Holding h;
    h.granted(grant());
    h.await_swap_in(1000);
    h.dropped(drop(100), 10);
    EXPECT_EQ(h.state(), HoldState::Draining);
    EXPECT_EQ(h.deadline(), 10u + 75u * 1000u);
    EXPECT_FALSE(h.swap_in_over(false, 20));
}

TEST(Holding, DropWithoutTheLockOnlyUpdatesTheWord)
{
    Holding h;
    h.request_sent();
    h.dropped(drop(100, proto::kGrantOversubscribed), 10);
    EXPECT_EQ(h.state(), HoldState::Requested);
    EXPECT_TRUE(h.oversubscribed());
    EXPECT_FALSE(h.deadline().has_value());
}

TEST(Holding, ContentionArrivesWhileHolding)
{
    Holding h;
    h.granted(grant());
    h.contention(grant(0, 5));
    EXPECT_TRUE(h.contended());
    EXPECT_EQ(h.keep_bytes(), proto::keep_from_wire(5));
    EXPECT_EQ(h.state(), HoldState::Holding);
}

TEST(Holding, RevokedOrLostFromAnyStateIsIdle)
{
    for (int i = 0; i < 2; ++i) {
        Holding h;
        h.granted(grant());
        h.await_swap_in(100);
        if (i == 0)
            h.revoked();
        else
            h.lost();
        EXPECT_EQ(h.state(), HoldState::Idle);
        EXPECT_FALSE(h.holds());
        EXPECT_FALSE(h.deadline().has_value());
        h.request_sent();
        EXPECT_EQ(h.state(), HoldState::Requested);
    }
}

}  // namespace
