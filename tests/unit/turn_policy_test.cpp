// The rules of daemon/turn_policy.h, one by one.
#include "daemon/turn_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace nvshare::daemon;
using namespace nvshare::daemon::policy;
using namespace std::chrono_literals;

namespace {

TEST(TurnPolicy, ClassesRankAndAgeUpwards)
{
    EXPECT_LT(class_rank(Priority::Interactive), class_rank(Priority::Normal));
    EXPECT_LT(class_rank(Priority::Normal), class_rank(Priority::Batch));
    EXPECT_EQ(class_rank(Priority::Unset), class_rank(Priority::Normal));
    // A batch waiter is raised one class per aging period: it never starves.
    EXPECT_EQ(waiting_rank(Priority::Batch, 29s, 30s), 2);
    EXPECT_EQ(waiting_rank(Priority::Batch, 30s, 30s), 1);
    EXPECT_EQ(waiting_rank(Priority::Batch, 61s, 30s), 0);
    EXPECT_EQ(waiting_rank(Priority::Batch, 1h, 30s), 0);
    EXPECT_EQ(waiting_rank(Priority::Interactive, 1h, 30s), 0);
    EXPECT_EQ(waiting_rank(Priority::Normal, 1h, Duration::zero()), 1);
}

TEST(TurnPolicy, OnlyAHigherClassCutsTheQuantumShort)
{
    EXPECT_EQ(preempted_quantum(30s, Priority::Normal, class_rank(Priority::Interactive)),
              kInteractivePreempt);
    EXPECT_EQ(preempted_quantum(30s, Priority::Batch, class_rank(Priority::Normal)), 7500ms);
    EXPECT_EQ(preempted_quantum(30s, Priority::Normal, class_rank(Priority::Normal)), 30s);
    EXPECT_EQ(preempted_quantum(30s, Priority::Interactive, class_rank(Priority::Interactive)),
              30s);
    EXPECT_EQ(preempted_quantum(30s, Priority::Normal, INT32_MAX), 30s) << "nobody waits";
    EXPECT_EQ(preempted_quantum(100ms, Priority::Batch, 0), 100ms) << "never longer";
}

TEST(TurnPolicy, BurstEstimateFollowsRecentBursts)
{
    EXPECT_EQ(next_burst_estimate(Duration::zero(), 2s), 2s);
    EXPECT_EQ(next_burst_estimate(2s, 6s), 3s);
    EXPECT_EQ(next_burst_estimate(2s, -1s), 2s);
}

TEST(TurnPolicy, WhoJoinsTheHolders)
{
    const std::vector<HolderBurst> steady{{Duration::zero(), 10s}};  // burst unknown
    const std::vector<HolderBurst> ending{{2s, 1800ms}};             // 0.2 s left
    const std::vector<HolderBurst> long_left{{8s, 1s}};              // 7 s left
    // Interactive: at once; batch: after a quantum, whatever the holders do.
    EXPECT_EQ(join_after(Priority::Interactive, 5s, 1s, ending, 30s), Duration::zero());
    EXPECT_EQ(join_after(Priority::Batch, Duration::zero(), 1s, steady, 30s), 30s);
    // Normal with bursts not known yet, or short ones: at once.
    EXPECT_EQ(join_after(Priority::Normal, Duration::zero(), 0s, ending, 30s), Duration::zero());
    EXPECT_EQ(join_after(Priority::Normal, kShortBurst, 0s, ending, 30s), Duration::zero());
    // Normal with 2 s bursts: waits for a holder whose burst ends soon...
    EXPECT_EQ(join_after(Priority::Normal, 2s, 100ms, ending, 30s), 4s);
    // ... at most a quantum ...
    EXPECT_EQ(join_after(Priority::Normal, 2s, 100ms, ending, 3s), 3s);
    // ... but runs alongside one that will run longer than its own burst,
    // or whose bursts are not known (a steady job).
    EXPECT_EQ(join_after(Priority::Normal, 2s, 100ms, long_left, 30s), 100ms);
    EXPECT_EQ(join_after(Priority::Normal, 2s, 100ms, steady, 30s), 100ms);
    // Nobody holds: it waits for its turn, as bounded.
    EXPECT_EQ(join_after(Priority::Normal, 2s, 0s, {}, 30s), 4s);
}

// The scheduler lists the holders only for the waiters whose join time
// they change: for every other waiter, they must change nothing.
TEST(TurnPolicy, OnlyANormalWaiterWithLongBurstsReadsTheHolders)
{
    const std::vector<HolderBurst> steady{{Duration::zero(), 10s}};
    const std::vector<Duration> bursts{Duration::zero(), 100ms, kShortBurst, 2s};
    for (const Priority cls :
         {Priority::Interactive, Priority::Normal, Priority::Batch, Priority::Unset}) {
        for (const Duration burst : bursts) {
            if (!join_reads_holders(cls, burst)) {
                EXPECT_EQ(join_after(cls, burst, 1s, steady, 30s),
                          join_after(cls, burst, 1s, {}, 30s))
                    << static_cast<int>(cls) << " " << burst.count();
            }
        }
    }
    EXPECT_TRUE(join_reads_holders(Priority::Normal, 2s));
    EXPECT_TRUE(join_reads_holders(Priority::Unset, 2s));
    EXPECT_NE(join_after(Priority::Normal, 2s, 1s, steady, 30s),
              join_after(Priority::Normal, 2s, 1s, {}, 30s));
}

TEST(TurnPolicy, UserShareCapIsTheLeastOtherUsersRun)
{
    EXPECT_EQ(user_share_cap({}), SIZE_MAX);
    EXPECT_EQ(user_share_cap({{1002, 0}}), 1u) << "a waiting user: one each";
    EXPECT_EQ(user_share_cap({{1002, 1}}), 1u);
    EXPECT_EQ(user_share_cap({{1002, 3}, {1003, 2}}), 2u);
}

TEST(TurnPolicy, UserSharesDecayAndCountRunningHolds)
{
    UserShares shares;
    const TimePoint t0{std::chrono::seconds(100)};
    EXPECT_EQ(shares.held(7, t0), 0.0);
    shares.hold_began(7, t0);
    EXPECT_NEAR(shares.held(7, t0 + 10s), 10.0, 1e-6) << "a running hold counts";
    shares.hold_ended(7, t0, t0 + 10s);
    EXPECT_NEAR(shares.held(7, t0 + 10s), 10.0, 1e-6);
    EXPECT_NEAR(shares.held(7, t0 + 10s + kUsageHalfLife), 5.0, 1e-6) << "half-life";
    shares.hold_began(7, t0 + 70s);
    shares.hold_began(7, t0 + 70s);
    EXPECT_NEAR(shares.held(7, t0 + 72s), 10.0 * std::exp2(-62.0 / 60.0) + 4.0, 1e-6);
    shares.hold_ended(8, t0, t0 + 72s);  // a user that holds nothing: ignored
    EXPECT_EQ(shares.held(8, t0 + 72s), 0.0);
}

}  // namespace
