#include "daemon/accept_gate.h"

#include <gtest/gtest.h>

using nvshare::daemon::AcceptGate;
using nvshare::daemon::kAcceptAtLeastEvery;
using nvshare::daemon::kAcceptsPerRound;
using nvshare::daemon::kConnectionBurst;
using nvshare::daemon::kConnectionLogInterval;
using nvshare::daemon::kConnectionsPerSecond;
using nvshare::daemon::kMaxUsers;
using nvshare::daemon::kSetupsPerRound;
using namespace std::chrono_literals;

namespace {

const auto kStart = AcceptGate::Clock::time_point{} + 1h;
constexpr uint32_t kUser = 1000;
const int kBurst = static_cast<int>(kConnectionBurst);

TEST(AcceptGate, AUserGetsItsBurstThenItsRate)
{
    AcceptGate gate;
    for (int i = 0; i < kBurst; ++i)
        ASSERT_TRUE(gate.admit(kUser, kStart)) << i;
    EXPECT_FALSE(gate.admit(kUser, kStart));
    EXPECT_FALSE(gate.admit(kUser, kStart + 1ms));
    // One more for each 1/kConnectionsPerSecond that passes.
    const auto one = std::chrono::duration_cast<AcceptGate::Clock::duration>(
        std::chrono::duration<double>(1.0 / kConnectionsPerSecond));
    EXPECT_TRUE(gate.admit(kUser, kStart + one + 1us));
    EXPECT_FALSE(gate.admit(kUser, kStart + one + 1us));
    // A second: kConnectionsPerSecond of them.
    int admitted = 0;
    for (int i = 0; i < 10 * kBurst; ++i)
        admitted += gate.admit(kUser, kStart + one + 1s + 1us) ? 1 : 0;
    EXPECT_EQ(admitted, static_cast<int>(kConnectionsPerSecond));
}

TEST(AcceptGate, OneUsersStormLeavesOthersAndRootTheirs)
{
    AcceptGate gate;
    for (int i = 0; i < kBurst; ++i)
        gate.admit(kUser, kStart);
    EXPECT_FALSE(gate.admit(kUser, kStart));
    EXPECT_TRUE(gate.admit(kUser + 1, kStart));
    for (int i = 0; i < 10 * kBurst; ++i)
        ASSERT_TRUE(gate.admit(0, kStart));
}

TEST(AcceptGate, ARoundSetsUpFewerThanItMayRefuse)
{
    static_assert(kSetupsPerRound < kAcceptsPerRound);
    EXPECT_TRUE(AcceptGate::round_goes_on(0, 0));
    EXPECT_TRUE(AcceptGate::round_goes_on(kSetupsPerRound - 1, kSetupsPerRound - 1));
    EXPECT_FALSE(AcceptGate::round_goes_on(kSetupsPerRound, kSetupsPerRound));
    // Refused ones are cheap: more of them.
    EXPECT_TRUE(AcceptGate::round_goes_on(kAcceptsPerRound - 1, 0));
    EXPECT_FALSE(AcceptGate::round_goes_on(kAcceptsPerRound, 0));
    EXPECT_FALSE(AcceptGate::round_goes_on(kAcceptsPerRound, kSetupsPerRound - 1));
}

TEST(AcceptGate, AClientsTurnTakesARoundOnceTheLastIsOldEnough)
{
    EXPECT_FALSE(AcceptGate::round_due(kStart, kStart));
    EXPECT_FALSE(AcceptGate::round_due(kStart, kStart + kAcceptAtLeastEvery - 1us));
    EXPECT_TRUE(AcceptGate::round_due(kStart, kStart + kAcceptAtLeastEvery));
    EXPECT_TRUE(AcceptGate::round_due(kStart, kStart + 1h));
}

TEST(AcceptGate, PausesAfterARoundMostlyRefused)
{
    EXPECT_FALSE(AcceptGate::pause_after(0, 0));
    EXPECT_FALSE(AcceptGate::pause_after(kAcceptsPerRound, 0));
    EXPECT_FALSE(AcceptGate::pause_after(kAcceptsPerRound, kAcceptsPerRound / 2 - 1));
    EXPECT_TRUE(AcceptGate::pause_after(kAcceptsPerRound, kAcceptsPerRound / 2));
    EXPECT_TRUE(AcceptGate::pause_after(kAcceptsPerRound, kAcceptsPerRound));
    EXPECT_TRUE(AcceptGate::pause_after(1, 1));
}

TEST(AcceptGate, LogsAUsersRefusalsOnceAnIntervalWithTheCountLeftOut)
{
    AcceptGate gate;
    uint64_t left_out = 99;
    ASSERT_TRUE(gate.log_refusal(kUser, kStart, &left_out));
    EXPECT_EQ(left_out, 0u);
    for (int i = 0; i < 5; ++i)
        EXPECT_FALSE(gate.log_refusal(kUser, kStart + 10ms, &left_out));
    EXPECT_TRUE(gate.log_refusal(kUser + 1, kStart + 10ms, &left_out));
    EXPECT_EQ(left_out, 0u);
    ASSERT_TRUE(gate.log_refusal(kUser, kStart + kConnectionLogInterval, &left_out));
    EXPECT_EQ(left_out, 5u);
}

TEST(AcceptGate, TheTableDropsUsersBackToTheirBurst)
{
    AcceptGate gate;
    for (uint32_t uid = 1; uid <= kMaxUsers; ++uid)
        ASSERT_TRUE(gate.admit(uid, kStart));
    EXPECT_EQ(gate.users(), kMaxUsers);
    // All have spent a connection: no room for another user yet.
    EXPECT_FALSE(gate.admit(kMaxUsers + 1, kStart));
    // Once their buckets are full again they go, and the newcomer gets in.
    const auto later = kStart + std::chrono::seconds(
                                    static_cast<int>(kConnectionBurst / kConnectionsPerSecond) + 2);
    EXPECT_TRUE(gate.admit(kMaxUsers + 1, later));
    EXPECT_EQ(gate.users(), 1u);
}

}  // namespace
