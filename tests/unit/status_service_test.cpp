#include "daemon/status_service.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

using nvshare::daemon::Duration;
using nvshare::daemon::kMaxUnreadPerPrincipal;
using nvshare::daemon::kStatusBurst;
using nvshare::daemon::kStatusMaxAge;
using nvshare::daemon::kStatusPerSecond;
using nvshare::daemon::kUnreadRetry;
using nvshare::daemon::Principals;
using nvshare::daemon::Scheduler;
using nvshare::daemon::StatusService;
using nvshare::daemon::TimePoint;
using namespace std::chrono_literals;

namespace {

const TimePoint kAsked = TimePoint{} + 1h;
constexpr uint32_t kAsker = 1000;
const int kQueryBurst = static_cast<int>(kStatusBurst);

// kAsker owns the subordinate uids 100000 to 165535.
Principals subordinates()
{
    std::vector<std::string> problems;
    return Principals::parse("1000:100000:65536\n", {}, &problems);
}

struct Service {
    Scheduler scheduler;
    Principals principals = subordinates();
    StatusService status{scheduler, principals};
};

TEST(StatusService, AUserGetsItsBurstThenWaitsForItsRate)
{
    Service s;
    for (int i = 0; i < kQueryBurst; ++i)
        ASSERT_EQ(s.status.wait(kAsker, kAsked), Duration::zero()) << i;
    const Duration wait = s.status.wait(kAsker, kAsked);
    EXPECT_GT(wait, Duration::zero());
    // About 1/kStatusPerSecond (rounded up).
    EXPECT_LE(wait, std::chrono::duration_cast<Duration>(
                        std::chrono::duration<double>(1.0 / kStatusPerSecond)) +
                        1us);
    EXPECT_EQ(s.status.wait(kAsker, kAsked + wait), Duration::zero());
    // Another user has a rate of its own, root none.
    EXPECT_EQ(s.status.wait(kAsker + 1, kAsked), Duration::zero());
    for (int i = 0; i < 10 * kQueryBurst; ++i)
        ASSERT_EQ(s.status.wait(0, kAsked), Duration::zero());
}

TEST(StatusService, ASubordinateUidSharesItsOwnersRate)
{
    Service s;
    for (int i = 0; i < kQueryBurst; ++i)
        ASSERT_EQ(s.status.wait(100000 + static_cast<uint32_t>(i), kAsked), Duration::zero());
    EXPECT_GT(s.status.wait(kAsker, kAsked), Duration::zero());
}

TEST(StatusService, UnreadOutputHoldsAUsersQueriesWithoutCharging)
{
    Service s;
    for (int i = 0; i < 3 * kQueryBurst; ++i)
        ASSERT_EQ(s.status.socket_wait(kAsker, kMaxUnreadPerPrincipal, kAsked), kUnreadRetry);
    // Nothing was charged: the whole burst is still there.
    for (int i = 0; i < kQueryBurst; ++i)
        ASSERT_EQ(s.status.socket_wait(kAsker, kMaxUnreadPerPrincipal - 1, kAsked),
                  Duration::zero())
            << i;
    EXPECT_GT(s.status.socket_wait(kAsker, 0, kAsked), Duration::zero());
    // Root's unread output is not held against it.
    EXPECT_EQ(s.status.socket_wait(0, kMaxUnreadPerPrincipal, kAsked), Duration::zero());
}

size_t connections_in(const std::string& text)
{
    return nlohmann::json::parse(text).at("connections").get<size_t>();
}

TEST(StatusService, TheDocumentIsMadeAgainWhenTheStateChangesOrItAges)
{
    Service s;
    EXPECT_EQ(connections_in(s.status.document(1, kAsked)), 1u);
    // Young and unchanged: the same document.
    EXPECT_EQ(connections_in(s.status.document(2, kAsked + kStatusMaxAge)), 1u);
    EXPECT_EQ(connections_in(s.status.document(2, kAsked + kStatusMaxAge + 1ns)), 2u);
    s.status.changed();
    EXPECT_EQ(connections_in(s.status.document(3, kAsked + kStatusMaxAge + 1ns)), 3u);
}

}  // namespace
