// The sub-allocator of small allocations (preload/swap/small_blocks.h).
#include "preload/swap/small_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace sb = nvshare::preload::small_blocks;

namespace {

constexpr uint64_t kSlab = 8ull << 20;
constexpr uint64_t kBase = 1ull << 40;

struct Fixture {
    sb::Pool pool;
    uint64_t next_base = kBase;
    Fixture() { EXPECT_TRUE(pool.set_slab_bytes(kSlab)); }
    // take(), adding a slab (at the next base) where none has room.
    uint64_t take(uint64_t bytes, uint64_t id = 0, uint32_t* slab_out = nullptr)
    {
        uint64_t addr = 0;
        uint32_t slab = 0;
        if (!pool.take(bytes, id, 0, &addr, &slab)) {
            uint32_t added = 0;
            EXPECT_TRUE(pool.add_slab(next_base, &added));
            next_base += 2 * kSlab;
            EXPECT_TRUE(pool.take(bytes, id, 0, &addr, &slab));
        }
        if (slab_out != nullptr)
            *slab_out = slab;
        return addr;
    }
};

}  // namespace

TEST(SmallBlocks, EveryBlockOfTheSearchedClassesIsLargeEnough)
{
    // The smallest size of each class, then: a search for `u` units starts at
    // a class whose smallest size is at least u, and the class of u is
    // never above it (classes grow with size).
    std::map<uint32_t, uint64_t> smallest;
    for (uint64_t u = 1; u <= 1 << 16; ++u)
        smallest.emplace(sb::class_of(u), u);
    uint32_t last = 0;
    for (uint64_t u = 1; u <= 1 << 16; ++u) {
        const uint32_t c = sb::class_of(u);
        EXPECT_GE(c, last) << u;
        last = c;
        const uint32_t from = sb::class_at_least(u);
        EXPECT_GE(from, c) << u;
        const auto it = smallest.find(from);
        if (it != smallest.end()) {
            EXPECT_GE(it->second, u) << u;
        }
    }
    EXPECT_LT(sb::class_of(sb::kMaxSlabUnits), 128u);
}

TEST(SmallBlocks, BlocksAreAlignedDisjointAndInsideTheirSlab)
{
    Fixture f;
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (uint64_t bytes : {1ull, 256ull, 511ull, 512ull, 513ull, 1000ull, 4096ull, 100000ull,
                           (1ull << 20) + 3, (2ull << 20) - 1}) {
        const uint64_t a = f.take(bytes);
        EXPECT_EQ(a % 512, 0u) << bytes;
        taken.emplace_back(a, bytes);
    }
    std::sort(taken.begin(), taken.end());
    for (size_t i = 0; i + 1 < taken.size(); ++i)
        EXPECT_LE(taken[i].first + taken[i].second, taken[i + 1].first);
    for (const auto& [a, bytes] : taken)
        EXPECT_LE(a + bytes, kBase + kSlab);  // all in the first slab
    EXPECT_EQ(f.pool.live_slabs(), 1u);
}

TEST(SmallBlocks, AFullSlabMakesTheNextBlockAskForAnother)
{
    Fixture f;
    uint64_t addr = 0;
    uint32_t slab = 0;
    EXPECT_FALSE(f.pool.take(512, 0, 0, &addr, &slab));  // no slab yet
    for (int i = 0; i < 4; ++i)
        f.take(2ull << 20);
    EXPECT_EQ(f.pool.live_slabs(), 1u);
    EXPECT_FALSE(f.pool.take(1, 0, 0, &addr, &slab));
    EXPECT_FALSE(f.pool.take(kSlab + 1, 0, 0, &addr, &slab));
    f.take(1);
    EXPECT_EQ(f.pool.live_slabs(), 2u);
}

TEST(SmallBlocks, FreedNeighboursJoinIntoOneBlock)
{
    Fixture f;
    const uint64_t a = f.take(3ull << 20), b = f.take(2ull << 20), c = f.take(3ull << 20);
    uint64_t addr = 0;
    uint32_t slab = 0;
    EXPECT_FALSE(f.pool.take(1, 0, 0, &addr, &slab));
    bool drop = true;
    EXPECT_TRUE(f.pool.give(0, b, &drop));
    EXPECT_FALSE(drop);
    // b's room alone: 4 MiB does not fit until a neighbour joins it.
    EXPECT_FALSE(f.pool.take(4ull << 20, 0, 0, &addr, &slab));
    EXPECT_TRUE(f.pool.give(0, a, &drop));
    EXPECT_TRUE(f.pool.take(5ull << 20, 0, 0, &addr, &slab));
    EXPECT_EQ(addr, a);
    EXPECT_TRUE(f.pool.give(0, a, &drop));
    EXPECT_TRUE(f.pool.give(0, c, &drop));
    EXPECT_FALSE(drop);  // the only empty slab stays
    EXPECT_TRUE(f.pool.empty(0));
    // The whole slab is one block again.
    EXPECT_TRUE(f.pool.take(kSlab, 0, 0, &addr, &slab));
    EXPECT_EQ(addr, kBase);
}

TEST(SmallBlocks, OnlyOneEmptySlabStays)
{
    Fixture f;
    uint32_t s1 = 0, s2 = 0, s3 = 0;
    const uint64_t a = f.take(5ull << 20, 0, &s1);
    const uint64_t b = f.take(5ull << 20, 0, &s2);
    const uint64_t c = f.take(5ull << 20, 0, &s3);
    EXPECT_EQ(f.pool.live_slabs(), 3u);
    bool drop = false;
    EXPECT_TRUE(f.pool.give(s1, a, &drop));
    EXPECT_FALSE(drop);  // kept
    EXPECT_TRUE(f.pool.give(s2, b, &drop));
    EXPECT_TRUE(drop);  // another is kept: this one goes
    EXPECT_EQ(f.pool.live_slabs(), 2u);
    // The kept slab is used again, then the third may stay.
    uint64_t addr = 0;
    uint32_t slab = 0;
    EXPECT_TRUE(f.pool.take(6ull << 20, 0, 0, &addr, &slab));
    EXPECT_EQ(slab, s1);
    EXPECT_TRUE(f.pool.give(s3, c, &drop));
    EXPECT_FALSE(drop);
    // A dropped slab's number is used again for the next slab.
    uint32_t again = 99;
    EXPECT_TRUE(f.pool.add_slab(kBase + 100 * kSlab, &again));
    EXPECT_EQ(again, s2);
}

TEST(SmallBlocks, FindGivesTheBlockHoldingAnAddress)
{
    Fixture f;
    uint32_t slab = 0;
    const uint64_t a = f.take(1000, 7, &slab);
    const uint64_t b = f.take(3000, 8, &slab);
    sb::Block block{};
    ASSERT_TRUE(f.pool.find(slab, a + 999, &block));
    EXPECT_EQ(block.start, a);
    EXPECT_EQ(block.bytes, 1000u);
    EXPECT_EQ(block.id, 7u);
    EXPECT_FALSE(f.pool.find(slab, a + 1000, &block));  // beyond what was asked for
    ASSERT_TRUE(f.pool.find(slab, b + 2048, &block));
    EXPECT_EQ(block.start, b);
    EXPECT_EQ(block.id, 8u);
    EXPECT_FALSE(f.pool.find(slab, b + (1ull << 20), &block));  // free space
    bool drop = false;
    EXPECT_TRUE(f.pool.give(slab, a, &drop));
    EXPECT_FALSE(f.pool.find(slab, a, &block));
    // Only a live block's start frees it.
    EXPECT_FALSE(f.pool.give(slab, a, &drop));
    EXPECT_FALSE(f.pool.give(slab, b + 512, &drop));
    EXPECT_FALSE(f.pool.give(slab, b + 1, &drop));
    EXPECT_TRUE(f.pool.give(slab, b, &drop));
}

// Random allocations and frees against a model: blocks never overlap, keep
// their bounds, and once all are freed one slab is left.
TEST(SmallBlocks, RandomUseKeepsBlocksApartAndGivesSlabsBack)
{
    Fixture f;
    std::mt19937_64 rng(42);
    std::map<uint64_t, std::pair<uint64_t, uint32_t>> live;  // addr -> bytes, slab
    uint64_t id = 0;
    for (int step = 0; step < 20000; ++step) {
        const bool alloc = live.empty() || rng() % 100 < 55;
        if (alloc) {
            const uint64_t bytes = rng() % 4 == 0 ? 1 + rng() % (2ull << 20) : 1 + rng() % 8192;
            uint32_t slab = 0;
            const uint64_t a = f.take(bytes, ++id, &slab);
            ASSERT_EQ(a % 512, 0u);
            auto next = live.lower_bound(a);
            if (next != live.end()) {
                ASSERT_LE(a + bytes, next->first);
            }
            if (next != live.begin()) {
                auto prev = std::prev(next);
                ASSERT_LE(prev->first + prev->second.first, a);
            }
            live[a] = {bytes, slab};
        } else {
            auto it = live.begin();
            std::advance(it, static_cast<long>(rng() % live.size()));
            sb::Block block{};
            ASSERT_TRUE(f.pool.find(it->second.second, it->first + it->second.first - 1, &block));
            ASSERT_EQ(block.start, it->first);
            bool drop = false;
            ASSERT_TRUE(f.pool.give(it->second.second, it->first, &drop));
            live.erase(it);
        }
    }
    for (const auto& [a, info] : live) {
        bool drop = false;
        ASSERT_TRUE(f.pool.give(info.second, a, &drop));
    }
    EXPECT_EQ(f.pool.live_slabs(), 1u);
}
