// The swap engine's switch policy (preload/swap/switch_policy.h): when host
// memory is made ahead, when memory that found no room is looked at again,
// when an allocation's wish for room is carried out, and how long a holder
// whose memory found no room stays idle; on a fake clock.
#include "preload/swap/switch_policy.h"

#include <gtest/gtest.h>

#include "preload/swap/tuning.h"

namespace {

using nvshare::preload::swap::Facts;
using nvshare::preload::swap::Hold;
using nvshare::preload::swap::Prestage;
using nvshare::preload::swap::SwitchPolicy;
namespace tuning = nvshare::preload::tuning;

constexpr uint64_t kMs = tuning::kMs;
constexpr uint64_t kStart = 1000 * tuning::kSec;  // the fake clock's origin

Facts at(uint64_t now, Hold hold, bool contended = false, bool oversubscribed = false)
{
    Facts f;
    f.now = now;
    f.hold = hold;
    f.contended = contended;
    f.oversubscribed = oversubscribed;
    return f;
}

// A holder that others wait for on an oversubscribed GPU.
Facts contended_holder(uint64_t now)
{
    return at(now, Hold::Running, true, true);
}

// A holder makes host memory for its next switch only once one is likely
// (Facts::switch_likely: a pause outlasted the switch, or the quantum's end
// is near); until then it looks again every kPauseLookNs, or at the
// time it becomes likely if that comes first, and makes it then.
TEST(SwitchPolicy, AHolderMakesHostMemoryForASwitchOnlyOnceOneIsLikely)
{
    SwitchPolicy p;
    p.granted();
    const uint64_t settled = kStart + tuning::kSettleBeforePrestageNs;
    Facts f = contended_holder(settled);
    f.switch_likely = false;
    f.switch_likely_at = settled + 10 * tuning::kSec;
    ASSERT_TRUE(p.prestage_pending(f));
    EXPECT_EQ(p.prestage(f).kind, Prestage::None);
    // Not asked again before the next look, and woken for it.
    f.now = settled + tuning::kPauseLookNs - 1;
    EXPECT_FALSE(p.prestage_pending(f));
    EXPECT_EQ(p.next_wake(f), settled + tuning::kPauseLookNs);
    f.now = settled + tuning::kPauseLookNs;
    EXPECT_TRUE(p.prestage_pending(f));
    EXPECT_EQ(p.prestage(f).kind, Prestage::None);
    // The quantum's lead comes before the next look: woken at it.
    f.switch_likely_at = f.now + tuning::kPauseLookNs / 2;
    EXPECT_EQ(p.prestage(f).kind, Prestage::None);  // not pending: a no-op
    f.now += tuning::kPauseLookNs;
    EXPECT_EQ(p.prestage(f).kind, Prestage::None);
    EXPECT_EQ(p.next_wake(f), f.switch_likely_at);
    f.now = f.switch_likely_at;
    f.switch_likely = true;
    EXPECT_EQ(p.prestage(f).kind, Prestage::ForSwitch);
    // A new contention looks at once.
    p.prestaged(false);
    Facts g = contended_holder(f.now + kMs);
    g.switch_likely = false;
    g.switch_likely_at = UINT64_MAX;
    p.contended();
    EXPECT_TRUE(p.prestage_pending(g));
    EXPECT_EQ(p.prestage(g).kind, Prestage::None);
    g.now += tuning::kPauseLookNs;
    g.switch_likely = true;
    EXPECT_EQ(p.prestage(g).kind, Prestage::ForSwitch);
}

TEST(SwitchPolicy, NothingIsMadeAheadWithoutAnEvent)
{
    SwitchPolicy p;
    EXPECT_FALSE(p.prestage_pending(contended_holder(kStart)));
    EXPECT_EQ(p.prestage(contended_holder(kStart)).kind, Prestage::None);
    EXPECT_EQ(p.next_wake(contended_holder(kStart)), UINT64_MAX);
}

TEST(SwitchPolicy, AContendedHolderMakesHostMemoryOnceItsMemorySettled)
{
    SwitchPolicy p;
    p.granted();
    p.memory_changed(kStart);
    // Still allocating: each step would hold up its next wait for room.
    const uint64_t settled = kStart + tuning::kSettleBeforePrestageNs;
    EXPECT_FALSE(p.prestage_pending(contended_holder(settled - 1)));
    EXPECT_EQ(p.prestage(contended_holder(settled - 1)).kind, Prestage::None);
    EXPECT_EQ(p.next_wake(contended_holder(settled - 1)), settled);
    // Settled: a step for its next switch, and another while steps remain.
    EXPECT_EQ(p.prestage(contended_holder(settled)).kind, Prestage::ForSwitch);
    p.prestaged(true);
    EXPECT_EQ(p.prestage(contended_holder(settled + kMs)).kind, Prestage::ForSwitch);
    p.prestaged(false);
    EXPECT_EQ(p.prestage(contended_holder(settled + 2 * kMs)).kind, Prestage::None);
    EXPECT_EQ(p.next_wake(contended_holder(settled + 2 * kMs)), UINT64_MAX);
    // New memory wants its own: the wish comes back, after it settles.
    p.memory_changed(settled + 3 * kMs);
    EXPECT_FALSE(p.prestage_pending(contended_holder(settled + 4 * kMs)));
    EXPECT_EQ(
        p.prestage(contended_holder(settled + 3 * kMs + tuning::kSettleBeforePrestageNs)).kind,
        Prestage::ForSwitch);
}

TEST(SwitchPolicy, AHolderNobodyWaitsForMakesNoneAndTheWishEnds)
{
    SwitchPolicy p;
    p.granted();
    EXPECT_EQ(p.prestage(at(kStart, Hold::Running, false, true)).kind, Prestage::None);
    // The wish ended: contention later starts it again.
    EXPECT_FALSE(p.prestage_pending(contended_holder(kStart + tuning::kSec)));
    p.contended();
    EXPECT_EQ(p.prestage(contended_holder(kStart + tuning::kSec)).kind, Prestage::ForSwitch);
}

TEST(SwitchPolicy, WhileASwapInOrADropMovesMemoryTheWishEnds)
{
    SwitchPolicy p;
    p.granted();
    EXPECT_EQ(p.next_wake(at(kStart, Hold::Moving, true, true)), UINT64_MAX);
    EXPECT_EQ(p.prestage(at(kStart, Hold::Moving, true, true)).kind, Prestage::None);
    EXPECT_FALSE(p.prestage_pending(contended_holder(kStart + tuning::kSec)));
}

TEST(SwitchPolicy, TheHostRunningLowEndsIt)
{
    SwitchPolicy p;
    p.granted();
    Facts f = contended_holder(kStart + tuning::kSec);
    f.host_low = true;
    EXPECT_EQ(p.prestage(f).kind, Prestage::None);
    f.host_low = false;
    EXPECT_FALSE(p.prestage_pending(f));
}

TEST(SwitchPolicy, AfterAShrinkAWaiterMakesHostMemoryForTheRoomBeyondIt)
{
    SwitchPolicy p;
    p.shrunk(10ull << 30);
    const auto step = p.prestage(at(kStart, Hold::None));
    EXPECT_EQ(step.kind, Prestage::ToKeep);
    EXPECT_EQ(step.bytes, (10ull << 30) - tuning::kShrinkAhead);
    EXPECT_EQ(p.next_wake(at(kStart, Hold::None)), kStart);  // the next step at once
    // A Shrink that leaves less than kShrinkAhead: down to nothing.
    p.shrunk(1ull << 30);
    EXPECT_EQ(p.prestage(at(kStart, Hold::None)).bytes, 0u);
    // A grant's terms replace the Shrink's.
    p.granted();
    EXPECT_EQ(p.prestage(at(kStart, Hold::None)).kind, Prestage::None);
}

TEST(SwitchPolicy, AWaiterOnAnOversubscribedGpuMakesSomeAhead)
{
    SwitchPolicy p;
    p.waits_oversubscribed();
    const auto step = p.prestage(at(kStart, Hold::None));
    EXPECT_EQ(step.kind, Prestage::Ahead);
    EXPECT_EQ(step.bytes, tuning::kShrinkAhead);
    p.prestaged(false);
    // The same notice again changes nothing; a grant forgets it.
    p.waits_oversubscribed();
    EXPECT_FALSE(p.prestage_pending(at(kStart, Hold::None)));
    p.granted();
    p.prestaged(false);
    p.waits_oversubscribed();
    EXPECT_EQ(p.prestage(at(kStart, Hold::None)).kind, Prestage::Ahead);
}

TEST(SwitchPolicy, StrandedMemoryIsLookedAtEveryPollWhileRunningAndNotInACapture)
{
    SwitchPolicy p;
    Facts f = at(kStart, Hold::Running);
    EXPECT_FALSE(p.promote_due(f));  // nothing stranded
    f.now += tuning::kPromotePollNs;
    f.stranded = 64ull << 20;
    EXPECT_TRUE(p.promote_due(f));
    EXPECT_EQ(p.next_wake(f), f.now + tuning::kPromotePollNs);
    EXPECT_FALSE(p.promote_due(f));  // looked at just now
    f.now += tuning::kPromotePollNs;
    f.captures = true;
    EXPECT_FALSE(p.promote_due(f));  // a capture: never drained
    f.now += tuning::kPromotePollNs;
    f.captures = false;
    f.hold = Hold::None;
    EXPECT_FALSE(p.promote_due(f));
    f.hold = Hold::Running;
    EXPECT_TRUE(p.promote_due(f));
}

TEST(SwitchPolicy, AHolderWhoseMemoryFoundNoRoomForLongLetsGoAtThePeriod)
{
    SwitchPolicy p;
    const uint64_t period = 100 * kMs, gaps_hold = 700 * kMs;
    Facts f = at(kStart, Hold::Running, true, true);
    f.stranded = 64ull << 20;
    p.observe(f);
    EXPECT_EQ(p.idle_hold(f, gaps_hold, period), gaps_hold);
    f.now += tuning::kStrandedPatienceNs - 1;
    p.observe(f);
    EXPECT_EQ(p.idle_hold(f, gaps_hold, period), gaps_hold);
    f.now += 1;
    p.observe(f);
    EXPECT_EQ(p.idle_hold(f, gaps_hold, period), period);
    // Room came: its pauses decide again, and the patience starts over.
    f.stranded = 0;
    p.observe(f);
    EXPECT_EQ(p.idle_hold(f, gaps_hold, period), gaps_hold);
    f.stranded = 64ull << 20;
    p.observe(f);
    EXPECT_EQ(p.idle_hold(f, gaps_hold, period), gaps_hold);
}

TEST(SwitchPolicy, AnAllocationsWishForRoomIsCarriedOutWhileRunningAndRetriedIfStuck)
{
    SwitchPolicy p;
    p.room_wanted();
    EXPECT_FALSE(p.room_due(at(kStart, Hold::None)));  // the next grant gives it
    EXPECT_FALSE(p.room_due(at(kStart, Hold::Moving)));
    EXPECT_TRUE(p.room_due(at(kStart, Hold::Running)));
    // Our work could not be drained: again 20 ms later, not before.
    p.room_tried(false, kStart);
    EXPECT_FALSE(p.room_due(at(kStart + 19 * kMs, Hold::Running)));
    EXPECT_EQ(p.next_wake(at(kStart + 19 * kMs, Hold::Running)), kStart + 20 * kMs);
    EXPECT_TRUE(p.room_due(at(kStart + 20 * kMs, Hold::Running)));
    p.room_tried(true, kStart + 20 * kMs);
    EXPECT_FALSE(p.room_due(at(kStart + 40 * kMs, Hold::Running)));
    // A grant's swap-in gives the memory: the wish ends.
    p.room_wanted();
    p.granted();
    EXPECT_FALSE(p.room_due(at(kStart + 60 * kMs, Hold::Running)));
}

}  // namespace
