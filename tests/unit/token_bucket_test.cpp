#include "daemon/token_bucket.h"

#include <gtest/gtest.h>

using nvshare::daemon::TokenBucket;
using namespace std::chrono_literals;

namespace {

const auto kStart = TokenBucket::Clock::time_point{} + 1h;

TEST(TokenBucket, AllowsTheBurstThenTheRate)
{
    TokenBucket b(10.0, 3.0);
    EXPECT_TRUE(b.take(kStart));
    EXPECT_TRUE(b.take(kStart));
    EXPECT_TRUE(b.take(kStart));
    EXPECT_FALSE(b.take(kStart));
    EXPECT_GT(b.wait(kStart), 99ms);
    EXPECT_LE(b.wait(kStart), 101ms);
    EXPECT_FALSE(b.take(kStart + 50ms));
    EXPECT_TRUE(b.take(kStart + 101ms));
    EXPECT_FALSE(b.take(kStart + 101ms));
}

TEST(TokenBucket, NeverHoldsMoreThanTheBurst)
{
    TokenBucket b(10.0, 2.0);
    const auto later = kStart + 1h;
    EXPECT_TRUE(b.take(later));
    EXPECT_TRUE(b.take(later));
    EXPECT_FALSE(b.take(later));
    EXPECT_EQ(b.wait(kStart + 1h + 1s), 0ns);
}

TEST(TokenBucket, ATimeGoingBackwardsChangesNothing)
{
    TokenBucket b(1.0, 1.0);
    EXPECT_TRUE(b.take(kStart));
    EXPECT_FALSE(b.take(kStart - 10s));
    EXPECT_FALSE(b.take(kStart + 500ms));
    EXPECT_TRUE(b.take(kStart + 1001ms));
}

}  // namespace
