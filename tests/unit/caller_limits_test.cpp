// The limits on what a D-Bus caller may cost (daemon/caller_limits.h),
// against a fake clock.
#include "daemon/caller_limits.h"

#include <gtest/gtest.h>

namespace nvshare::daemon {
namespace {

using namespace std::chrono_literals;
using Admission = CallerLimits::Admission;

const auto kT0 = CallerLimits::Clock::time_point{} + 1h;
constexpr uid_t kNobody = 65534;

TEST(CallerLimits, ACallerRefusedTooOftenIsRefusedWithoutAsking)
{
    CallerLimits limits;
    for (int i = 0; i < static_cast<int>(kRefusalBurst); ++i) {
        ASSERT_EQ(limits.admit(kNobody, kT0), Admission::Ask) << i;
        limits.finished(kNobody, /*refused=*/true, kT0);
    }
    EXPECT_EQ(limits.admit(kNobody, kT0), Admission::RefusedTooOften);
    // Another user is not charged for it.
    EXPECT_EQ(limits.admit(1000, kT0), Admission::Ask);
    limits.finished(1000, false, kT0);
    // One refusal is paid back in 1 / kRefusalsPerSecond seconds.
    const auto back = limits.retry_after(kNobody, kT0);
    EXPECT_GT(back, 999ms);
    EXPECT_LE(back, 1001ms);
    EXPECT_EQ(limits.admit(kNobody, kT0 + 900ms), Admission::RefusedTooOften);
    EXPECT_EQ(limits.admit(kNobody, kT0 + back), Admission::Ask);
}

TEST(CallerLimits, AllowedChecksCostNothing)
{
    CallerLimits limits;
    for (int i = 0; i < 100; ++i) {
        ASSERT_EQ(limits.admit(kNobody, kT0), Admission::Ask) << i;
        limits.finished(kNobody, /*refused=*/false, kT0);
    }
    EXPECT_EQ(limits.pending(), 0u);
}

TEST(CallerLimits, PendingChecksAreBoundedPerCallerAndInAll)
{
    CallerLimits limits;
    for (unsigned i = 0; i < kPendingPerCaller; ++i)
        ASSERT_EQ(limits.admit(kNobody, kT0), Admission::Ask);
    EXPECT_EQ(limits.admit(kNobody, kT0), Admission::TooManyPending);
    limits.finished(kNobody, false, kT0);
    EXPECT_EQ(limits.admit(kNobody, kT0), Admission::Ask);

    CallerLimits all;
    uid_t uid = 2000;
    for (unsigned i = 0; i < kPendingInAll; ++i)
        ASSERT_EQ(all.admit(uid++, kT0), Admission::Ask);
    EXPECT_EQ(all.admit(uid, kT0), Admission::TooManyPending);
    EXPECT_EQ(all.pending(), kPendingInAll);
    all.finished(2000, true, kT0);
    EXPECT_EQ(all.admit(uid, kT0), Admission::Ask);
}

TEST(CallerLimits, RefusalsAreLoggedOnceASecondWithTheCountLeftOut)
{
    CallerLimits limits;
    uint64_t left_out = 99;
    EXPECT_TRUE(limits.log_refusal(kNobody, kT0, &left_out));
    EXPECT_EQ(left_out, 0u);
    for (int i = 0; i < 7; ++i)
        EXPECT_FALSE(limits.log_refusal(kNobody, kT0 + 100ms * i, &left_out));
    EXPECT_TRUE(limits.log_refusal(1000, kT0 + 500ms, &left_out));  // each caller its own
    EXPECT_TRUE(limits.log_refusal(kNobody, kT0 + 1s, &left_out));
    EXPECT_EQ(left_out, 7u);
}

TEST(CallerLimits, TheTableKeepsOnlyCallersItMustRemember)
{
    CallerLimits limits;
    // Callers allowed long ago leave no trace once the table fills.
    for (uid_t uid = 0; uid < kMaxCallers; ++uid) {
        ASSERT_EQ(limits.admit(uid + 10000, kT0), Admission::Ask);
        limits.finished(uid + 10000, false, kT0);
    }
    EXPECT_EQ(limits.callers(), kMaxCallers);
    EXPECT_EQ(limits.admit(1, kT0 + 2s), Admission::Ask);
    EXPECT_EQ(limits.callers(), 1u);
    limits.finished(1, false, kT0 + 2s);

    // Callers with a refusal not yet paid back stay, and a newcomer finds
    // no room.
    CallerLimits full;
    for (uid_t uid = 0; uid < kMaxCallers; ++uid) {
        ASSERT_EQ(full.admit(uid + 10000, kT0), Admission::Ask);
        full.finished(uid + 10000, /*refused=*/true, kT0);
    }
    EXPECT_EQ(full.admit(1, kT0 + 500ms), Admission::TooManyPending);
    // Once their refusals are paid back (1 s), they go.
    EXPECT_EQ(full.admit(1, kT0 + 1001ms), Admission::Ask);
    EXPECT_EQ(full.callers(), 1u);
}

}  // namespace
}  // namespace nvshare::daemon
