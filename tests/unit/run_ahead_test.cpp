// The run-ahead bound on its own: a holder of a serialized GPU is told to
// keep its work short while a process of a higher class is around there,
// told again only where that changes, and looked at again when an idle one
// stops counting.
#include "daemon/run_ahead.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "daemon/turn_policy.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

// Named: the unit tests are built in unity chunks.
namespace run_ahead_test {
namespace {

const TimePoint t0{std::chrono::seconds(1000)};

struct Fixture {
    std::vector<Gpu> gpus{2};
    std::vector<MemberClasses> classes{2};
    std::map<ClientId, ClientRecord> clients;
    std::vector<Action> out;
    RunAhead run_ahead{[this](GpuIndex g) -> const MemberClasses& { return classes[g]; }};

    ClientRecord& holder(ClientId id, GpuIndex gpu, Priority priority = Priority::Batch)
    {
        ClientRecord& c = clients[id];
        c.id = id;
        c.info.priority = priority;
        c.held = gpu_bit(gpu);
        gpus[gpu].holders.push_back(id);
        classes[gpu].add(policy::class_rank(priority), true, t0);
        return c;
    }
    void publish(GpuSet serialized, TimePoint now)
    {
        out.clear();
        run_ahead.publish(gpus, clients, serialized, now, out);
    }
};

TEST(RunAhead, BoundedWhileAHigherClassIsBusyOnASerializedGpu)
{
    Fixture x;
    ClientRecord& h = x.holder(1, 0);
    x.classes[0].add(policy::class_rank(Priority::Normal), true, t0);
    x.run_ahead.granted(h, gpu_bit(0), t0);
    EXPECT_TRUE(h.bounded_sent);
    x.publish(gpu_bit(0), t0);
    EXPECT_TRUE(x.out.empty());  // as its grant said
    // Not serialized (soft turns): no bound, and it is told so once.
    x.publish(0, t0);
    ASSERT_EQ(x.out.size(), 1u);
    EXPECT_EQ(x.out[0].kind, ActionKind::RunAhead);
    EXPECT_EQ(x.out[0].client, 1u);
    EXPECT_FALSE(x.out[0].bounded);
    EXPECT_FALSE(h.bounded_sent);
    x.publish(0, t0);
    EXPECT_TRUE(x.out.empty());
    // A lower class does not bound it.
    ClientRecord& n = x.holder(2, 1, Priority::Normal);
    x.classes[1].add(policy::class_rank(Priority::Batch), true, t0);
    x.run_ahead.granted(n, gpu_bit(1), t0);
    EXPECT_FALSE(n.bounded_sent);
}

TEST(RunAhead, AnIdleHigherClassStopsCountingAfterTheRelease)
{
    Fixture x;
    ClientRecord& h = x.holder(1, 0);
    // Idle since t0: counts until t0 + kHigherClassIdleRelease.
    x.classes[0].add(policy::class_rank(Priority::Interactive), false, t0);
    x.run_ahead.granted(h, gpu_bit(0), t0 + 1s);
    EXPECT_TRUE(h.bounded_sent);
    EXPECT_EQ(x.run_ahead.recheck(), t0 + policy::kHigherClassIdleRelease);
    const TimePoint after = t0 + policy::kHigherClassIdleRelease;
    x.publish(gpu_bit(0), after);
    ASSERT_EQ(x.out.size(), 1u);
    EXPECT_FALSE(x.out[0].bounded);
    EXPECT_FALSE(x.run_ahead.recheck());
}

TEST(RunAhead, AGpuThatHadABoundedHolderIsLookedAtOnceMore)
{
    Fixture x;
    ClientRecord& h = x.holder(1, 0);
    x.classes[0].add(policy::class_rank(Priority::Normal), true, t0);
    x.run_ahead.granted(h, gpu_bit(0), t0);
    ASSERT_TRUE(h.bounded_sent);
    // Its GPU no longer serialized nor named: it still hears its bound ended.
    x.publish(gpu_bit(1), t0);
    ASSERT_EQ(x.out.size(), 1u);
    EXPECT_FALSE(x.out[0].bounded);
}

}  // namespace
}  // namespace run_ahead_test
