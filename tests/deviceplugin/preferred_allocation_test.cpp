// GetPreferredAllocation's policies and the share IDs, without gRPC.
#include "deviceplugin/preferred_allocation.h"

#include <gtest/gtest.h>

#include "deviceplugin/share_id.h"

namespace nvshare::deviceplugin {
namespace {

const std::string kA = "GPU-aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";
const std::string kB = "GPU-bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb";
const std::string kC = "GPU-cccccccc-cccc-cccc-cccc-cccccccccccc";

std::vector<std::string> shares(const std::vector<std::string>& gpus, unsigned n)
{
    std::vector<std::string> ids;
    for (const auto& g : gpus)
        for (unsigned k = 0; k < n; ++k)
            ids.push_back(share_id(g, k));
    return ids;
}

TEST(ShareId, RoundTrips)
{
    EXPECT_EQ(share_id(kA, 7), kA + "::7");
    EXPECT_EQ(gpu_of_share(kA + "::7"), kA);
    EXPECT_LE(share_id(kA, 999).size(), 63u);  // the kubelet's limit
    EXPECT_EQ(gpu_of_share(kA), "");
    EXPECT_EQ(gpu_of_share(kA + "::"), "");
    EXPECT_EQ(gpu_of_share(kA + "::x1"), "");
    EXPECT_EQ(gpu_of_share("::3"), "");
}

TEST(PreferredAllocation, SpreadTakesEachGpuInTurn)
{
    const auto got = preferred_allocation(shares({kA, kB, kC}, 3), {}, 4, Policy::Spread);
    EXPECT_EQ(got, (std::vector<std::string>{kA + "::0", kB + "::0", kC + "::0", kA + "::1"}));
}

TEST(PreferredAllocation, PackFillsOneGpuFirst)
{
    const auto got = preferred_allocation(shares({kA, kB}, 3), {}, 4, Policy::Pack);
    EXPECT_EQ(got, (std::vector<std::string>{kA + "::0", kA + "::1", kA + "::2", kB + "::0"}));
}

TEST(PreferredAllocation, PackStartsOnTheGpuWithMostSharesFree)
{
    // A's shares are partly taken by other pods: B can hold the whole request.
    const std::vector<std::string> available{kA + "::2", kB + "::0", kB + "::1", kB + "::2"};
    EXPECT_EQ(preferred_allocation(available, {}, 2, Policy::Pack),
              (std::vector<std::string>{kB + "::0", kB + "::1"}));
}

TEST(PreferredAllocation, MustIncludeComesFirstAndCounts)
{
    const auto all = shares({kA, kB}, 3);
    // Spread: A already has one, so the next goes to B.
    EXPECT_EQ(preferred_allocation(all, {kA + "::1"}, 2, Policy::Spread),
              (std::vector<std::string>{kA + "::1", kB + "::0"}));
    // Pack: stay on A, never repeating the included share.
    EXPECT_EQ(preferred_allocation(all, {kA + "::1"}, 3, Policy::Pack),
              (std::vector<std::string>{kA + "::1", kA + "::0", kA + "::2"}));
}

TEST(PreferredAllocation, NeverMoreThanOffered)
{
    EXPECT_EQ(preferred_allocation({kA + "::0"}, {}, 3, Policy::Spread),
              (std::vector<std::string>{kA + "::0"}));
    EXPECT_TRUE(preferred_allocation(shares({kA}, 2), {}, 0, Policy::Pack).empty());
}

TEST(PreferredAllocation, PolicyNames)
{
    EXPECT_EQ(parse_policy("spread"), Policy::Spread);
    EXPECT_EQ(parse_policy("pack"), Policy::Pack);
    EXPECT_FALSE(parse_policy("Spread"));
}

// Issue 47: each ID is looked up once and each pick costs a logarithm, so
// an offer of 200,000 shares on as many GPUs (the kubelet forwards what the
// plugin advertised; IDs are not checked against real GPUs) is answered at
// once; one pass over the GPUs per pick took minutes, past the test's
// timeout.
TEST(PreferredAllocation, ALargeOfferOnManyGpusIsAnsweredInOnePass)
{
    constexpr size_t kGpus = 200000;
    std::vector<std::string> offered;
    offered.reserve(kGpus);
    for (size_t i = 0; i < kGpus; ++i)
        offered.push_back(share_id("GPU-" + std::to_string(i), 0));
    for (Policy policy : {Policy::Spread, Policy::Pack}) {
        const auto chosen = preferred_allocation(offered, {}, kGpus, policy);
        ASSERT_EQ(chosen.size(), kGpus);
        EXPECT_EQ(chosen.front(), offered.front());  // ties: the first offered
        EXPECT_EQ(chosen.back(), offered.back());
    }
}

}  // namespace
}  // namespace nvshare::deviceplugin
