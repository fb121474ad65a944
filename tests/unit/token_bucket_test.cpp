#include "daemon/token_bucket.h"

#include <gtest/gtest.h>

using nvshare::daemon::TokenBucket;
using namespace std::chrono_literals;

namespace {

const auto t0 = TokenBucket::Clock::time_point{} + 1h;

TEST(TokenBucket, AllowsTheBurstThenTheRate)
{
    TokenBucket b(10.0, 3.0);
    EXPECT_TRUE(b.take(t0));
    EXPECT_TRUE(b.take(t0));
    EXPECT_TRUE(b.take(t0));
    EXPECT_FALSE(b.take(t0));
    EXPECT_GT(b.wait(t0), 99ms);
    EXPECT_LE(b.wait(t0), 101ms);
    EXPECT_FALSE(b.take(t0 + 50ms));
    EXPECT_TRUE(b.take(t0 + 101ms));
    EXPECT_FALSE(b.take(t0 + 101ms));
}

TEST(TokenBucket, NeverHoldsMoreThanTheBurst)
{
    TokenBucket b(10.0, 2.0);
    const auto later = t0 + 1h;
    EXPECT_TRUE(b.take(later));
    EXPECT_TRUE(b.take(later));
    EXPECT_FALSE(b.take(later));
    EXPECT_EQ(b.wait(t0 + 1h + 1s), 0ns);
}

TEST(TokenBucket, ATimeGoingBackwardsChangesNothing)
{
    TokenBucket b(1.0, 1.0);
    EXPECT_TRUE(b.take(t0));
    EXPECT_FALSE(b.take(t0 - 10s));
    EXPECT_FALSE(b.take(t0 + 500ms));
    EXPECT_TRUE(b.take(t0 + 1001ms));
}

}  // namespace
