#include "daemon/connection.h"

#include <gtest/gtest.h>

#include "daemon/process_exit.h"

using nvshare::daemon::Connection;
using nvshare::daemon::kExitWaitMax;
using nvshare::daemon::kHelloDeadline;
using nvshare::daemon::kUnreadLimit;
using nvshare::daemon::TimePoint;
using namespace std::chrono_literals;

namespace {

const TimePoint kOpened = TimePoint{} + 1h;

// No descriptor and no sources: only its state, as next_deadline() reads it.
struct Unwatched {
    std::vector<uint64_t> doomed;
    Connection c{nullptr, 7, -1, ucred{}, 1000, doomed};
};

TEST(Connection, AnUnregisteredOneHasItsHelloDeadlineAndARegisteredOneNone)
{
    Unwatched u;
    u.c.hello_deadline = kOpened + kHelloDeadline;
    EXPECT_EQ(u.c.next_deadline(), kOpened + kHelloDeadline);
    u.c.registered = true;
    EXPECT_EQ(u.c.next_deadline(), std::nullopt);
}

TEST(Connection, APauseOrUnreadOutputEndsEarlierDeadlines)
{
    Unwatched u;
    u.c.hello_deadline = kOpened + kHelloDeadline;
    u.c.paused = true;
    u.c.resume_at = kOpened + 100ms;
    EXPECT_EQ(u.c.next_deadline(), kOpened + 100ms);
    u.c.resume_at = kOpened + kHelloDeadline + 1s;
    EXPECT_EQ(u.c.next_deadline(), kOpened + kHelloDeadline);

    u.c.registered = true;
    u.c.paused = false;
    u.c.out.resize(10);
    u.c.out_sent = 4;
    u.c.read_progress = kOpened;
    EXPECT_EQ(u.c.unread(), 6u);
    EXPECT_EQ(u.c.next_deadline(), kOpened + kUnreadLimit);
    u.c.out_sent = 10;  // all read
    EXPECT_EQ(u.c.next_deadline(), std::nullopt);
}

TEST(Connection, AnExitingHoldersWaitReplacesTheHelloDeadline)
{
    Unwatched u;
    u.c.hello_deadline = kOpened;
    u.c.exit_fd = 1000000;  // not a descriptor: never closed here
    u.c.closed_at = kOpened + 1s;
    EXPECT_EQ(u.c.next_deadline(), kOpened + 1s + kExitWaitMax);
    u.c.exit_fd = -1;
}

TEST(Connection, MarkedDeadOnceForTheNextReap)
{
    Unwatched u;
    u.c.mark_dead();
    u.c.mark_dead();
    EXPECT_TRUE(u.c.dead);
    EXPECT_EQ(u.doomed, std::vector<uint64_t>{7});
}

}  // namespace
