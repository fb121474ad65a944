// The per-user, per-GPU usage behind the metrics (daemon/usage.*), driven
// through a real Scheduler.
#include "daemon/usage.h"

#include <gtest/gtest.h>

#include "daemon/scheduler.h"
#include "tests/support/sizes.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

using nvshare::test::GiB;

Usage at(const std::map<UsageKey, Usage>& usage, GpuIndex gpu, uint32_t uid)
{
    const auto it = usage.find({gpu, uid});
    return it == usage.end() ? Usage{} : it->second;
}

TEST(Usage, CountsSurviveTheClientAndStayPerUserAndGpu)
{
    Scheduler s(SchedulerSettings{Mode::On, 30s, 10s});
    const GpuIndex g0 = *s.ensure_gpu({"GPU-0", "test", 80 * GiB});
    const GpuIndex g1 = *s.ensure_gpu({"GPU-1", "test", 80 * GiB});
    TimePoint t{};
    ASSERT_TRUE(s.connect(1, {1, 1000, "a"}, {g0}));
    ASSERT_TRUE(s.connect(2, {2, 1001, "b"}, {g0}));
    ASSERT_TRUE(s.connect(3, {3, 1000, "c"}, {g1}));
    s.request(1, gpu_bit(g0), t);  // granted at once
    s.request(2, gpu_bit(g0), t);  // waits behind 1
    ASSERT_TRUE(s.report_swaps(1, g0, {100, 40, 1, 2ms, 1, 3ms}, t));

    auto u = s.usage(t + 1s);
    EXPECT_EQ(at(u, g0, 1000).grants, 1u);
    EXPECT_EQ(at(u, g0, 1000).held, 1s);
    EXPECT_EQ(at(u, g0, 1001).waiting, 1u);
    EXPECT_EQ(at(u, g0, 1001).waited, 1s);
    EXPECT_EQ(at(u, g0, 1000).clients, 1u);
    EXPECT_EQ(at(u, g1, 1000).clients, 1u);
    EXPECT_EQ(at(u, g1, 1000).grants, 0u);

    // Client 1 exits after 2 s: its hold ends, 2 gets the GPU, and user
    // 1000's counters on GPU 0 stay, while it no longer counts as a client.
    s.disconnect(1, t + 2s);
    u = s.usage(t + 3s);
    EXPECT_EQ(at(u, g0, 1000).grants, 1u);
    EXPECT_EQ(at(u, g0, 1000).held, 2s);
    EXPECT_EQ(at(u, g0, 1000).bytes_swapped_in, 100u);
    EXPECT_EQ(at(u, g0, 1000).bytes_swapped_out, 40u);
    EXPECT_EQ(at(u, g0, 1000).swap_out_time, 3ms);
    EXPECT_EQ(at(u, g0, 1000).clients, 0u);
    EXPECT_EQ(at(u, g0, 1001).grants, 1u);
    EXPECT_EQ(at(u, g0, 1001).waited, 2s);
    EXPECT_EQ(at(u, g0, 1001).held, 1s);
    EXPECT_EQ(at(u, g0, 1001).waiting, 0u);

    // A second client of the same user adds to the same series.
    ASSERT_TRUE(s.connect(4, {4, 1000, "d"}, {g0}));
    s.release(2, gpu_bit(g0), t + 3s);
    s.request(4, gpu_bit(g0), t + 3s);
    s.disconnect(4, t + 4s);
    u = s.usage(t + 5s);
    EXPECT_EQ(at(u, g0, 1000).grants, 2u);
    EXPECT_EQ(at(u, g0, 1000).held, 3s);
}

TEST(Usage, RevocationsAndDropsAreCounted)
{
    Scheduler s(SchedulerSettings{Mode::On, 1s, 1s});
    const GpuIndex g = *s.ensure_gpu({"GPU-0", "test", 80 * GiB});
    TimePoint t{};
    ASSERT_TRUE(s.connect(1, {1, 1000, "a"}, {g}));
    ASSERT_TRUE(s.connect(2, {2, 1001, "b"}, {g}));
    s.request(1, gpu_bit(g), t);
    s.request(2, gpu_bit(g), t);
    s.tick(t + 1s);  // quantum over: 1 is asked to drop
    s.tick(t + 2s);  // grace over: revoked
    s.disconnect(1, t + 3s);
    auto u = s.usage(t + 3s);
    EXPECT_EQ(at(u, g, 1000).drops, 1u);
    EXPECT_EQ(at(u, g, 1000).revocations, 1u);
    EXPECT_EQ(at(u, g, 1001).revocations, 0u);
}

// A user with no client keeps their counts for kUsageKeep; another user's
// live clients keep theirs whatever the time.
TEST(Usage, CountsOfUsersWithNoClientExpireAfterADay)
{
    Scheduler s(SchedulerSettings{Mode::On, 30s, 10s});
    const GpuIndex g = *s.ensure_gpu({"GPU-0", "test", 80 * GiB});
    TimePoint t{};
    ASSERT_TRUE(s.connect(1, {1, 1000, "gone"}, {g}));
    ASSERT_TRUE(s.connect(2, {2, 1001, "stays"}, {g}));
    s.request(1, gpu_bit(g), t);
    s.disconnect(1, t + 1s);
    // A later departure, within the day: user 1000's counts stay.
    ASSERT_TRUE(s.connect(3, {3, 1002, "brief"}, {g}));
    s.disconnect(3, t + 23h);
    EXPECT_EQ(at(s.usage(t + 23h), g, 1000).grants, 1u);
    // After a day without a client of user 1000, the next departure takes
    // its counts away; user 1001's live client keeps its series.
    ASSERT_TRUE(s.connect(4, {4, 1002, "brief"}, {g}));
    s.disconnect(4, t + 25h);
    const auto u = s.usage(t + 25h);
    EXPECT_FALSE(u.contains({g, 1000}));
    EXPECT_TRUE(u.contains({g, 1001}));
    EXPECT_TRUE(u.contains({g, 1002}));
}

// However many users ever came, at most kMaxUsageRecords records of users
// with no client stay: the least recently active go first.
TEST(Usage, TheRecordsOfUsersWithNoClientAreBounded)
{
    Scheduler s(SchedulerSettings{Mode::On, 30s, 10s});
    const GpuIndex g = *s.ensure_gpu({"GPU-0", "test", 80 * GiB});
    TimePoint t{};
    const uint32_t users = static_cast<uint32_t>(kMaxUsageRecords) + 100;
    for (uint32_t i = 0; i < users; ++i) {
        ASSERT_TRUE(s.connect(i + 1, {static_cast<int32_t>(i + 1), 10000 + i, "x"}, {g}));
        s.disconnect(i + 1, t + std::chrono::seconds(i));
    }
    const auto u = s.usage(t + std::chrono::seconds(users));
    EXPECT_LE(u.size(), kMaxUsageRecords + 1);
    EXPECT_FALSE(u.contains({g, 10000}));             // the first ones went
    EXPECT_TRUE(u.contains({g, 10000 + users - 1}));  // the last stays
}

}  // namespace
