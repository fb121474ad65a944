// The GPU table on its own: who may add a GPU, whose word sets its memory
// size and, where no capacity is configured, its capacity, and the per-GPU
// capacity, mode and time quantum kept by UUID.
#include "daemon/gpu_table.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/sizes.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

// Named: the unit tests are built in unity chunks.
namespace gpu_table_test {
namespace {

using nvshare::test::GiB;

std::optional<GpuTable::Found> claim(GpuTable& t, const std::string& uuid, uint64_t memory,
                                     uint32_t uid, uint32_t principal = 0)
{
    std::string refusal;
    return t.claim({uuid, "test", memory}, uid,
                   uid == 0    ? 0
                   : principal ? principal
                               : uid,
                   &refusal);
}

TEST(GpuTable, TheHostsGpusAreFoundByUuidAndTheirSizeIsTrusted)
{
    GpuTable t;
    const auto a = t.ensure({"GPU-a", "A", 0});
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->added);
    EXPECT_EQ(a->gpu, 0u);
    EXPECT_TRUE(t[0].listed_by_host);
    EXPECT_FALSE(t[0].memory_confirmed);  // no size given
    // Listed again with NVML's size: the same GPU, its size and capacity set.
    const auto again = t.ensure({"GPU-a", "", 16 * GiB});
    ASSERT_TRUE(again);
    EXPECT_FALSE(again->added);
    EXPECT_TRUE(again->capacity_set);
    EXPECT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].description.name, "A");
    EXPECT_TRUE(t[0].memory_confirmed);
    EXPECT_EQ(t[0].capacity, 16 * GiB);
    // Confirmed: what a client claims, root's too, changes it no more.
    const auto claimed = claim(t, "GPU-a", 8 * GiB, 0);
    ASSERT_TRUE(claimed);
    EXPECT_FALSE(claimed->capacity_set);
    EXPECT_EQ(t[0].description.physical_memory, 16 * GiB);
}

TEST(GpuTable, AUsersClaimStandsOnlyWhileNothingIsKnown)
{
    GpuTable t;
    ASSERT_TRUE(claim(t, "GPU-a", 16 * GiB, 1000));
    EXPECT_FALSE(t[0].memory_confirmed);
    EXPECT_EQ(t[0].named_by, 1000u);
    EXPECT_EQ(t[0].capacity, 16 * GiB);
    // A later user's claim, larger or smaller, changes nothing.
    EXPECT_FALSE(claim(t, "GPU-a", 64 * GiB, 1001)->capacity_set);
    EXPECT_FALSE(claim(t, "GPU-a", 1 * GiB, 1000)->capacity_set);
    EXPECT_EQ(t[0].description.physical_memory, 16 * GiB);
    // Root's word sets it for good.
    EXPECT_TRUE(claim(t, "GPU-a", 24 * GiB, 0)->capacity_set);
    EXPECT_TRUE(t[0].memory_confirmed);
    EXPECT_EQ(t[0].capacity, 24 * GiB);
    EXPECT_FALSE(claim(t, "GPU-a", 32 * GiB, 0)->capacity_set);
    EXPECT_EQ(t[0].description.physical_memory, 24 * GiB);
}

TEST(GpuTable, ImplausibleClaimsAreRefused)
{
    GpuTable t;
    std::string why;
    EXPECT_FALSE(t.claim({"GPU-a", "", kMinGpuMemory - 1}, 0, 0, &why));
    EXPECT_NE(why.find("implausible"), std::string::npos);
    EXPECT_FALSE(t.claim({"GPU-a", "", kMaxReportedBytes + 1}, 0, 0, &why));
    EXPECT_EQ(t.size(), 0u);
    EXPECT_TRUE(t.claim({"GPU-a", "", kMaxReportedBytes}, 1000, 1000, &why));
    EXPECT_TRUE(t.claim({"GPU-b", "", kMinGpuMemory}, 1000, 1000, &why));
}

TEST(GpuTable, AUserAddsOnlyAFewGpusTheHostDoesNotList)
{
    GpuTable t;
    ASSERT_TRUE(t.ensure({"GPU-listed", "", 16 * GiB}));
    for (size_t i = 0; i < kMaxUnlistedGpusPerUser; ++i)
        ASSERT_TRUE(claim(t, "GPU-u" + std::to_string(i), 16 * GiB, 1000));
    std::string why;
    EXPECT_FALSE(t.claim({"GPU-more", "", 16 * GiB}, 1000, 1000, &why));
    EXPECT_NE(why.find("not a GPU the host lists"), std::string::npos);
    // Counted per principal: a subordinate uid counts against its owner.
    EXPECT_FALSE(claim(t, "GPU-more", 16 * GiB, 100000, 1000));
    // The host's own GPUs and the ones already known are not counted.
    EXPECT_TRUE(claim(t, "GPU-listed", 16 * GiB, 1000));
    EXPECT_TRUE(claim(t, "GPU-u0", 16 * GiB, 1000));
    EXPECT_TRUE(claim(t, "GPU-more", 16 * GiB, 1001));
    EXPECT_TRUE(claim(t, "GPU-root", 16 * GiB, 0));  // root is not limited
}

TEST(GpuTable, HoldsAtMostMaxGpus)
{
    GpuTable t;
    for (GpuIndex g = 0; g < kMaxGpus; ++g)
        ASSERT_TRUE(t.ensure({"GPU-" + std::to_string(g), "", 16 * GiB}));
    EXPECT_FALSE(t.ensure({"GPU-extra", "", 16 * GiB}));
    std::string why;
    EXPECT_FALSE(t.claim({"GPU-extra", "", 16 * GiB}, 0, 0, &why));
    EXPECT_EQ(why, "too many GPUs on this host");
    EXPECT_TRUE(t.ensure({"GPU-3", "", 16 * GiB}));  // known ones are still found
}

TEST(GpuTable, CapacityByUuidElseTheDefaultElseTheSize)
{
    GpuTable t;
    t.set_capacity_override("GPU-a", 4 * GiB);
    ASSERT_TRUE(t.ensure({"GPU-a", "", 16 * GiB}));
    ASSERT_TRUE(t.ensure({"GPU-b", "", 16 * GiB}));
    EXPECT_EQ(t[0].capacity, 4 * GiB);
    EXPECT_EQ(t[1].capacity, 16 * GiB);
    // A configured capacity does not follow the size.
    EXPECT_FALSE(t.ensure({"GPU-a", "", 32 * GiB})->capacity_set);
    EXPECT_EQ(t[0].capacity, 4 * GiB);
    t.set_default_capacity(8 * GiB);
    ASSERT_TRUE(t.ensure({"GPU-c", "", 16 * GiB}));
    EXPECT_EQ(t[2].capacity, 8 * GiB);
    EXPECT_FALSE(t.ensure({"GPU-b", "", 32 * GiB})->capacity_set);  // a default is set
    EXPECT_EQ(t[1].capacity, 16 * GiB);
    // Set at run time: kept for its UUID.
    EXPECT_TRUE(t.set_capacity(2, 2 * GiB));
    EXPECT_EQ(t[2].capacity, 2 * GiB);
    EXPECT_FALSE(t.set_capacity(3, 2 * GiB));
    t.set_default_capacity(std::nullopt);
    EXPECT_FALSE(t.ensure({"GPU-c", "", 32 * GiB})->capacity_set);
    EXPECT_TRUE(t.ensure({"GPU-b", "", 32 * GiB})->capacity_set);
    EXPECT_EQ(t[1].capacity, 32 * GiB);
}

TEST(GpuTable, AGpusOwnModeAndQuantumElseTheHostWideOnes)
{
    GpuTable t;
    t.set_mode("GPU-b", Mode::Off);  // before it is seen
    ASSERT_TRUE(t.ensure({"GPU-a", "", 16 * GiB}));
    ASSERT_TRUE(t.ensure({"GPU-b", "", 16 * GiB}));
    EXPECT_EQ(t.mode_of(0, Mode::On), Mode::On);
    EXPECT_EQ(t.mode_of(1, Mode::On), Mode::Off);
    EXPECT_EQ(t.mode_of(7, Mode::Auto), Mode::Auto);  // not a GPU it knows
    t.set_time_quantum("GPU-a", 5s);
    EXPECT_EQ(t.time_quantum_of(0, 30s), 5s);
    EXPECT_EQ(t.time_quantum_of(1, 30s), 30s);
    EXPECT_EQ(t.modes().size(), 1u);
    EXPECT_EQ(t.time_quanta().size(), 1u);
    t.set_mode("GPU-b", std::nullopt);
    t.set_time_quantum("GPU-a", std::nullopt);
    EXPECT_EQ(t.mode_of(1, Mode::On), Mode::On);
    EXPECT_EQ(t.time_quantum_of(0, 30s), 30s);
    EXPECT_TRUE(t.modes().empty());
    EXPECT_TRUE(t.time_quanta().empty());
}

}  // namespace
}  // namespace gpu_table_test
