// The rules for joining the holders of a GPU taken in soft or group turns,
// on holders, waiters and a line the test makes, at times it picks.
#include "daemon/soft_join.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "daemon/turn_policy.h"

using namespace nvshare::daemon;
using namespace nvshare::daemon::soft_join;
using namespace std::chrono_literals;

namespace {

const TimePoint t0 = TimePoint{} + 100s;
constexpr Duration kQuantum = 30s;

class SoftJoinTest : public ::testing::Test {
protected:
    // A process of user `uid`; granted at `granted` (its first grant) if given.
    ClientRecord& client(ClientId id, uint32_t uid, std::optional<TimePoint> granted = {})
    {
        ClientRecord& c = clients_[id];
        c.id = id;
        c.info = ClientInfo(static_cast<int32_t>(id), uid, "app");
        c.sequence = id;
        if (granted) {
            c.granted_at = *granted;
            c.first_granted_at = *granted;
            c.grew_at = *granted;  // settles kStartupSettle later
        }
        return c;
    }
    ClientRecord& hold(ClientId id, uint32_t uid, TimePoint granted)
    {
        ClientRecord& c = client(id, uid, granted);
        holders_.push_back(id);
        return c;
    }
    ClientRecord& wait(ClientId id, uint32_t uid, TimePoint since,
                       std::optional<TimePoint> granted = {})
    {
        ClientRecord& c = client(id, uid, granted);
        c.phase = Phase::Waiting;
        c.waiting_since = since;
        line_.add(c);
        return c;
    }
    Turn turn() const { return {holders_, clients_, line_}; }

    std::map<ClientId, ClientRecord> clients_;
    std::vector<ClientId> holders_;
    WaitingLine line_;
};

TEST_F(SoftJoinTest, AProcessSettlesAfterItsFirstGrant)
{
    ClientRecord& never = client(1, 1000);
    EXPECT_EQ(settled_time(never), TimePoint::max());
    EXPECT_TRUE(starting(never, t0 + 1000s));
    ClientRecord& c = client(2, 1000, t0);
    EXPECT_EQ(settled_time(c), t0 + policy::kStartupSettle);
    EXPECT_TRUE(starting(c, t0));
    EXPECT_FALSE(starting(c, t0 + policy::kStartupSettle));
}

TEST_F(SoftJoinTest, HoldersSettleWithTheLastOfThem)
{
    EXPECT_EQ(holders_settled(turn()), TimePoint{});
    hold(1, 1000, t0);
    hold(2, 1001, t0 + 1s);
    EXPECT_EQ(holders_settled(turn()), t0 + 1s + policy::kStartupSettle);
}

TEST_F(SoftJoinTest, OneStartingJoinsOnceTheHoldersSettled)
{
    hold(1, 1000, t0);
    const ClientRecord& w = wait(2, 1001, t0);  // never granted: starting
    EXPECT_EQ(join_time(w, turn(), kQuantum, t0), t0 + policy::kStartupSettle);
    EXPECT_FALSE(may_join(w, turn(), kQuantum, t0));
    EXPECT_TRUE(may_join(w, turn(), kQuantum, t0 + policy::kStartupSettle));
}

TEST_F(SoftJoinTest, InteractiveAndStartedOnesDoNotWaitForStarts)
{
    hold(1, 1000, t0);
    ClientRecord& fast = wait(2, 1001, t0);
    fast.info.priority = Priority::Interactive;
    EXPECT_EQ(join_time(fast, turn(), kQuantum, t0), t0);
    const ClientRecord& started = wait(3, 1002, t0, t0 - 10s);
    EXPECT_EQ(join_time(started, turn(), kQuantum, t0), t0);
}

TEST_F(SoftJoinTest, PolicyJoinTimeReadsTheHoldersBursts)
{
    ClientRecord& h = hold(1, 1000, t0 - 10s);
    ClientRecord& w = wait(2, 1001, t0 - 1s, t0 - 20s);
    w.burst = 2s;   // long: it compares the holders' bursts
    h.burst = 20s;  // runs 10 s more, longer than the waiter's burst: join now
    EXPECT_EQ(policy_join_time(w, turn(), kQuantum, t0), t0);
    h.burst = 11s;  // 1 s more: the waiter waits twice its burst
    EXPECT_EQ(policy_join_time(w, turn(), kQuantum, t0), t0 - 1s + 4s);
    w.info.priority = Priority::Batch;  // after a quantum
    EXPECT_EQ(policy_join_time(w, turn(), kQuantum, t0), t0 - 1s + kQuantum);
}

TEST_F(SoftJoinTest, AUsersShareIsTheLeastOfTheOthersButOne)
{
    hold(1, 1000, t0);
    EXPECT_EQ(share_cap(1000, turn()), SIZE_MAX) << "no other user";
    hold(2, 1000, t0);
    hold(3, 1001, t0);
    hold(4, 1001, t0);
    hold(5, 1001, t0);
    EXPECT_EQ(share_cap(1000, turn()), 3u);
    EXPECT_EQ(share_cap(1001, turn()), 2u);
    EXPECT_TRUE(user_may_join(1000, turn()));
    EXPECT_FALSE(user_may_join(1001, turn()));
    wait(6, 1002, t0);  // a user that waits counts with none running
    EXPECT_EQ(share_cap(1000, turn()), 1u);
    EXPECT_FALSE(user_may_join(1000, turn()));
    EXPECT_TRUE(user_may_join(1002, turn()));
}

TEST_F(SoftJoinTest, MayJoinOnlyBelowItsUsersShare)
{
    hold(1, 1000, t0 - 10s);
    hold(2, 1001, t0 - 10s);
    const ClientRecord& mine = wait(3, 1000, t0, t0 - 20s);
    const ClientRecord& other = wait(4, 1002, t0, t0 - 20s);
    EXPECT_FALSE(may_join(mine, turn(), kQuantum, t0)) << "1000 runs as many as 1001";
    EXPECT_TRUE(may_join(other, turn(), kQuantum, t0));
}

TEST_F(SoftJoinTest, TheLaterHoldersOfAUserAreOverItsShare)
{
    const ClientRecord& first = hold(1, 1000, t0);
    const ClientRecord& tie = hold(2, 1000, t0);  // same grant: after by id
    const ClientRecord& later = hold(3, 1000, t0 + 1s);
    const ClientRecord& other = hold(4, 1001, t0);
    EXPECT_FALSE(over_share(first, turn()));
    EXPECT_TRUE(over_share(tie, turn()));
    EXPECT_TRUE(over_share(later, turn()));
    EXPECT_FALSE(over_share(other, turn()));
    holders_.pop_back();  // 1000 alone: no limit
    EXPECT_FALSE(over_share(later, turn()));
}

TEST_F(SoftJoinTest, FollowersStartOnceTheHoldersSettled)
{
    EXPECT_TRUE(followers_may_start(turn(), t0));
    EXPECT_EQ(followers_due(turn(), t0), std::nullopt);
    hold(1, 1000, t0);
    EXPECT_EQ(followers_due(turn(), t0), t0 + policy::kStartupSettle);
    EXPECT_FALSE(followers_may_start(turn(), t0));
    EXPECT_EQ(followers_due(turn(), t0 + policy::kStartupSettle), std::nullopt);
    EXPECT_TRUE(followers_may_start(turn(), t0 + policy::kStartupSettle));
}

TEST_F(SoftJoinTest, AGroupTakesOneMoreOnceSettledWithRoom)
{
    const TimePoint settled = t0 + policy::kStartupSettle;
    EXPECT_TRUE(group_open(turn(), TimePoint{}, t0));
    ClientRecord& h = hold(1, 1000, t0);
    EXPECT_FALSE(group_open(turn(), TimePoint{}, t0)) << "a holder starts";
    EXPECT_TRUE(group_open(turn(), TimePoint{}, settled));
    EXPECT_FALSE(group_open(turn(), settled + 1s, settled)) << "short of room";
    EXPECT_TRUE(group_open(turn(), settled + 1s, settled + 1s));
    h.drop_sent = true;
    EXPECT_FALSE(group_open(turn(), TimePoint{}, settled)) << "a holder leaves";
}

}  // namespace
