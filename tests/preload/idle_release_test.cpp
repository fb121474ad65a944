// When an idle holder hands the GPU on (preload/lock/idle_release.h), and
// what its pauses then read as to IdleGaps; on a fake clock.
#include "preload/lock/idle_release.h"

#include <gtest/gtest.h>

#include "preload/lock/idle_gaps.h"
#include "preload/swap/tuning.h"

namespace idle_release_test {
namespace {

using nvshare::preload::IdleGaps;
namespace idle_release = nvshare::preload::idle_release;
using idle_release::Step;
namespace tuning = nvshare::preload::tuning;

constexpr uint64_t kMs = tuning::kMs;
constexpr uint64_t kStart = 1000 * tuning::kSec;  // the fake clock's origin

idle_release::Look quiet(uint64_t now, uint64_t hold, uint64_t period = 100 * kMs)
{
    idle_release::Look l;
    l.now = now;
    l.period = period;
    l.hold = hold;
    l.quiet_since = kStart;
    return l;
}

TEST(IdleRelease, WaitsOutTheHoldThenDrains)
{
    const auto early = idle_release::look(quiet(kStart + 60 * kMs, 100 * kMs));
    EXPECT_EQ(early.step, Step::Wait);
    EXPECT_EQ(early.next_look, kStart + 100 * kMs) << "looks again when the hold ends";
    EXPECT_EQ(idle_release::look(quiet(kStart + 100 * kMs, 100 * kMs)).step, Step::Drain);
    // The hold, not the period: longer (a switch's cost) or shorter (pauses
    // proved long).
    EXPECT_EQ(idle_release::look(quiet(kStart + 200 * kMs, 300 * kMs)).step, Step::Wait);
    EXPECT_EQ(idle_release::look(quiet(kStart + 20 * kMs, 20 * kMs)).step, Step::Drain);
}

// A long hold is looked at every kPauseLookNs at least: a look planned at
// its end fell inside the next pause (IdleGaps::next_look).
TEST(IdleRelease, LooksAgainWithinALongHold)
{
    const auto d = idle_release::look(quiet(kStart + 10 * kMs, 600 * kMs));
    EXPECT_EQ(d.step, Step::Wait);
    EXPECT_EQ(d.next_look, kStart + 10 * kMs + IdleGaps::kPauseLookNs);
}

TEST(IdleRelease, WorkSinceTheLastLookEndsThePause)
{
    auto l = quiet(kStart + 500 * kMs, 100 * kMs);
    l.active = true;
    EXPECT_EQ(idle_release::look(l).step, Step::Resumed);
}

TEST(IdleRelease, NeverInACapture)
{
    auto l = quiet(kStart + 500 * kMs, 100 * kMs);
    l.capturing = true;
    EXPECT_EQ(idle_release::look(l).step, Step::Wait);
    l.active = true;
    EXPECT_EQ(idle_release::look(l).step, Step::Wait);
}

// A holder that lets go sooner than the period is watched closely, so that
// the end of its burst is seen when it comes; others every period.
TEST(IdleRelease, AHoldShorterThanThePeriodIsWatchedClosely)
{
    auto l = quiet(kStart + 500 * kMs, 20 * kMs);
    l.active = true;
    EXPECT_EQ(idle_release::look(l).next_look, l.now + idle_release::kQuickCheckNs);
    l.hold = 100 * kMs;
    EXPECT_EQ(idle_release::look(l).next_look, l.now + 50 * kMs);  // kPauseLookNs < the period
    l.period = l.hold = 20 * kMs;
    EXPECT_EQ(idle_release::look(l).next_look, l.now + 20 * kMs);
}

// The holder lets go after waiting out a long hold (here 650 ms: its share
// of a switch, counting host memory still to make) in a 700 ms pause, and
// asks again when its work resumes: the pause began when its work ran out,
// so IdleGaps learns it outlasts the hold. Timed from the look that let go
// it read 50 ms, and every later pause was held for a whole switch again.
TEST(IdleRelease, APauseIsTimedFromWhenTheWorkRanOut)
{
    const uint64_t hold = 650 * kMs;
    IdleGaps gaps;
    const auto l = quiet(kStart + hold, hold);
    ASSERT_EQ(idle_release::look(l).step, Step::Drain);
    const auto a = idle_release::after_drain(l, l.now + kMs / 10);  // nothing was running
    ASSERT_TRUE(a.release);
    EXPECT_EQ(a.idle_ns, hold + kMs / 10);
    gaps.idle_since(a.idle_from);
    // A wish for the lock left from the grant's swap-in (the program's calls
    // waited at the gate and asked again) is dropped as it lets go: kept, it
    // asked again at once, and the pause ended there.
    EXPECT_TRUE(a.forget_wish);
    // It asks again, and the pause ends, when the work resumes (with the
    // wish kept: at once, where the pause began).
    gaps.resumed(a.forget_wish ? kStart + 700 * kMs : a.idle_from);
    EXPECT_TRUE(gaps.long_seen(hold)) << "the 700 ms pause outlasted the hold";
    EXPECT_LT(gaps.hold_for(hold, 100 * kMs), hold);
}

// Work queued before the pause and still running at the drain: the GPU has
// been idle only since the drain ended; the holder waits its hold from there.
TEST(IdleRelease, WorkStillRunningAtTheDrainStartsThePauseThere)
{
    const auto l = quiet(kStart + 100 * kMs, 100 * kMs);
    const uint64_t drained = l.now + 30 * kMs;
    const auto a = idle_release::after_drain(l, drained);
    EXPECT_FALSE(a.release);
    EXPECT_EQ(a.idle_from, drained);
    EXPECT_EQ(a.quiet_since, drained);
    EXPECT_EQ(a.next_look, drained + 50 * kMs);
    // With no hold it lets go at once, idle for none of it.
    const auto now = idle_release::after_drain(quiet(kStart + 100 * kMs, 0), drained);
    EXPECT_TRUE(now.release);
    EXPECT_EQ(now.idle_ns, 0u);
    EXPECT_EQ(now.idle_from, drained);
}

}  // namespace
}  // namespace idle_release_test
