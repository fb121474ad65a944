// A GPU's soft-turn followers on their own: one deadline entry for all of
// them under the smallest id, the records and the member sets kept in step,
// the pending ones by their bound, and who goes next by the line's order.
#include "daemon/soft_followers.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

using namespace nvshare::daemon;
using namespace std::chrono_literals;

// Named: the unit tests are built in unity chunks.
namespace soft_followers_test {
namespace {

const TimePoint t0{std::chrono::seconds(1000)};
constexpr GpuIndex kGpu = 2;

struct Fixture {
    std::map<ClientId, ClientRecord> clients;
    Deadlines deadlines;
    SoftFollowers f;

    ClientRecord& waiter(ClientId id, uint32_t principal, uint64_t sequence,
                         Priority priority = Priority::Normal)
    {
        ClientRecord& c = clients[id];
        c.id = id;
        c.info.principal = principal;
        c.info.priority = priority;
        c.sequence = sequence;
        f.joined(id);
        f.queued(id);
        return c;
    }
};

TEST(SoftFollowers, OneDeadlineEntryUnderTheSmallestId)
{
    Fixture x;
    ClientRecord& a = x.waiter(5, 1000, 1);
    ClientRecord& b = x.waiter(3, 1000, 2);
    x.f.follow(a, kGpu, x.deadlines);
    EXPECT_EQ(a.follows, kGpu);
    EXPECT_FALSE(x.deadlines.next());  // no holder is starting
    x.f.set_at(t0 + 1s, x.deadlines);
    EXPECT_EQ(*x.deadlines.due(t0 + 1s), Deadlines::Entry(t0 + 1s, 5));
    // A smaller id joins: the entry moves to it.
    x.f.follow(b, kGpu, x.deadlines);
    EXPECT_EQ(*x.deadlines.due(t0 + 1s), Deadlines::Entry(t0 + 1s, 3));
    EXPECT_FALSE(x.deadlines.another_before({t0 + 1s, 3}, 9));  // one entry only
    EXPECT_EQ(x.f.first(), 3u);
    EXPECT_EQ(x.f.last(), 5u);
    // It leaves: their deadline becomes its own, beside theirs.
    x.f.unfollow(b, true, x.deadlines);
    EXPECT_FALSE(b.follows);
    EXPECT_EQ(b.deadline, t0 + 1s);
    EXPECT_EQ(*x.deadlines.due(t0 + 1s), Deadlines::Entry(t0 + 1s, 3));
    EXPECT_TRUE(x.deadlines.another_before({t0 + 1s, 3}, 9));  // and 5's
    x.deadlines.set(b, std::nullopt);
    EXPECT_EQ(*x.deadlines.due(t0 + 1s), Deadlines::Entry(t0 + 1s, 5));
    x.f.set_at(std::nullopt, x.deadlines);
    EXPECT_FALSE(x.deadlines.next());
    EXPECT_EQ(x.f.at(), std::nullopt);
}

TEST(SoftFollowers, FollowersAndPendingOnesAreNeitherLooseNorOthers)
{
    Fixture x;
    ClientRecord& a = x.waiter(1, 1000, 1);
    ClientRecord& b = x.waiter(2, 1000, 2);
    x.waiter(3, 1000, 3);
    x.f.follow(a, kGpu, x.deadlines);
    x.f.set_pending(b, {kGpu, t0 + 5s}, t0 + 5s);
    EXPECT_EQ(b.pending, std::pair(kGpu, t0 + 5s));
    EXPECT_EQ(x.f.loose(), std::set<ClientId>({3}));
    EXPECT_EQ(x.f.others(), std::set<ClientId>({3}));
    // Leaving them while still waiting: loose again; having stopped: not.
    x.f.unfollow(a, false, x.deadlines);
    x.f.clear_pending(b, true);
    EXPECT_FALSE(b.pending);
    EXPECT_EQ(x.f.loose(), std::set<ClientId>({2, 3}));
    EXPECT_EQ(x.f.others(), std::set<ClientId>({1, 2, 3}));
    EXPECT_TRUE(x.f.pending().empty());
    EXPECT_TRUE(x.f.empty());
}

TEST(SoftFollowers, PendingOnesToLookAtAgain)
{
    Fixture x;
    ClientRecord& a = x.waiter(1, 1000, 1);
    ClientRecord& b = x.waiter(2, 1000, 2);
    ClientRecord& c = x.waiter(3, 1000, 3);
    x.f.set_pending(a, {kGpu, t0 + 9s}, t0 + 9s);
    x.f.set_pending(b, {kGpu, t0 + 2s}, t0 + 2s);
    // Its deadline is not its bound (the holders' start was): driven.
    x.f.set_pending(c, {kGpu, t0 + 7s}, t0 + 8s);
    EXPECT_EQ(x.f.to_update(t0 + 1s), std::vector<ClientId>({3}));
    EXPECT_EQ(x.f.to_update(t0 + 2s), std::vector<ClientId>({3, 2}));
    EXPECT_EQ(x.f.to_update(t0 + 9s), std::vector<ClientId>({3, 2, 3, 1}));
    // Its deadline is its bound again: no longer driven.
    x.f.set_pending(c, {kGpu, t0 + 7s}, t0 + 7s);
    EXPECT_EQ(x.f.to_update(t0 + 1s), std::vector<ClientId>());
    EXPECT_EQ(x.f.pending().begin()->second, 2u);
}

TEST(SoftFollowers, TheNextInLineAmongEachUsersFirst)
{
    Fixture x;
    // Users 1000 and 1001; in each bucket the arrivals' order is the line's.
    for (const auto& [id, principal, sequence] :
         std::vector<std::tuple<ClientId, uint32_t, uint64_t>>{
             {1, 1000, 10}, {2, 1000, 11}, {3, 1001, 12}, {4, 1001, 13}})
        x.f.follow(x.waiter(id, principal, sequence), kGpu, x.deadlines);
    const auto place_of = [](ClientId id) { return static_cast<int>(id * 10); };
    const auto everyone = [](uint32_t) { return true; };
    const auto not_1000 = [](uint32_t uid) { return uid != 1000; };
    EXPECT_EQ(x.f.next_in_line(std::optional<int>(), place_of, everyone), 10);
    EXPECT_EQ(x.f.next_in_line(std::optional<int>(10), place_of, everyone), 20);
    EXPECT_EQ(x.f.next_in_line(std::optional<int>(20), place_of, everyone), 30);
    EXPECT_EQ(x.f.next_in_line(std::optional<int>(), place_of, not_1000), 30);
    EXPECT_EQ(x.f.next_in_line(std::optional<int>(40), place_of, everyone), std::nullopt);
    EXPECT_TRUE(x.f.any_may_join(not_1000));
    EXPECT_FALSE(x.f.any_may_join([](uint32_t uid) { return uid == 7; }));
    // A bucket is (user, class): an interactive one of user 1000 is apart.
    ClientRecord& i = x.waiter(5, 1000, 14, Priority::Interactive);
    x.f.follow(i, kGpu, x.deadlines);
    EXPECT_EQ(x.f.next_in_line(std::optional<int>(20), place_of,
                               [](uint32_t uid) { return uid == 1000; }),
              50);
    x.f.unfollow(x.clients.at(1), true, x.deadlines);
    EXPECT_EQ(x.f.next_in_line(std::optional<int>(), place_of, everyone), 20);
}

TEST(SoftFollowers, DisbandedTheyAreAllLoose)
{
    Fixture x;
    x.f.follow(x.waiter(1, 1000, 1), kGpu, x.deadlines);
    x.f.follow(x.waiter(2, 1000, 2), kGpu, x.deadlines);
    x.f.set_pending(x.waiter(3, 1000, 3), {kGpu, t0 + 5s}, t0 + 6s);
    x.f.set_at(t0 + 1s, x.deadlines);
    x.f.disband(x.clients, x.deadlines);
    EXPECT_TRUE(x.f.empty());
    EXPECT_TRUE(x.f.pending().empty());
    EXPECT_TRUE(x.f.to_update(t0 + 9s).empty());
    EXPECT_EQ(x.f.loose(), std::set<ClientId>({1, 2, 3}));
    // The followers keep their deadline as their own.
    EXPECT_EQ(x.clients.at(1).deadline, t0 + 1s);
    EXPECT_EQ(x.clients.at(2).deadline, t0 + 1s);
    EXPECT_FALSE(x.clients.at(1).follows);
    EXPECT_FALSE(x.clients.at(3).pending);
}

}  // namespace
}  // namespace soft_followers_test
