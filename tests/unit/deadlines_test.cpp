// The deadline set on its own: a client's own deadline and its record
// agree, shared entries stand apart, and entries come due in (time,
// client) order.
#include "daemon/deadlines.h"

#include <gtest/gtest.h>

using namespace nvshare::daemon;
using namespace std::chrono_literals;

// Named: the unit tests are built in unity chunks.
namespace deadlines_test {
namespace {

const TimePoint t0{std::chrono::seconds(1000)};

ClientRecord record(ClientId id)
{
    ClientRecord c;
    c.id = id;
    return c;
}

TEST(Deadlines, AClientsOwnDeadlineIsItsRecords)
{
    Deadlines d;
    ClientRecord a = record(1);
    EXPECT_FALSE(d.next());
    d.set(a, t0 + 5s);
    EXPECT_EQ(a.deadline, t0 + 5s);
    EXPECT_EQ(d.next(), t0 + 5s);
    // Moved: its old entry goes.
    d.set(a, t0 + 2s);
    EXPECT_EQ(a.deadline, t0 + 2s);
    EXPECT_FALSE(d.due(t0 + 1s));
    ASSERT_TRUE(d.due(t0 + 2s));
    EXPECT_EQ(*d.due(t0 + 2s), Deadlines::Entry(t0 + 2s, 1));
    d.set(a, std::nullopt);
    EXPECT_FALSE(a.deadline);
    EXPECT_FALSE(d.next());
    EXPECT_FALSE(d.due(t0 + 10s));
}

TEST(Deadlines, ComeDueInTimeThenClientOrder)
{
    Deadlines d;
    ClientRecord a = record(3), b = record(2);
    d.set(a, t0 + 1s);
    d.set(b, t0 + 1s);
    d.add({t0, 7});  // one that stands for others
    EXPECT_EQ(*d.due(t0 + 1s), Deadlines::Entry(t0, 7));
    d.remove({t0, 7});
    EXPECT_EQ(*d.due(t0 + 1s), Deadlines::Entry(t0 + 1s, 2));
    d.set(b, std::nullopt);
    EXPECT_EQ(*d.due(t0 + 1s), Deadlines::Entry(t0 + 1s, 3));
    EXPECT_EQ(b.deadline, std::nullopt);
}

TEST(Deadlines, AnotherDueAtTheSameTimeBeforeAClient)
{
    Deadlines d;
    d.add({t0, 2});
    d.add({t0, 5});
    d.add({t0 + 1s, 3});
    EXPECT_TRUE(d.another_before({t0, 2}, 9));
    EXPECT_TRUE(d.another_before({t0, 2}, 6));
    EXPECT_FALSE(d.another_before({t0, 2}, 5));  // 5 itself is not before 5
    EXPECT_FALSE(d.another_before({t0, 5}, 9));  // 3 comes later
    EXPECT_FALSE(d.another_before({t0 + 1s, 3}, 9));
}

}  // namespace
}  // namespace deadlines_test
