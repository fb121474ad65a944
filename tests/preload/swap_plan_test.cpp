// The swap engine's pure rules (preload/swap/swap_plan.h).
#include "preload/swap/swap_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "preload/swap/host_budget.h"

using namespace nvshare::preload::swap_plan;

namespace {

constexpr uint64_t MiB = 1ull << 20;

// The chunks tile the reservation exactly, none above the chunk size.
void expect_tiles(const Layout& l)
{
    uint64_t covered = 0;
    for (uint32_t i = 0; i < l.count; ++i) {
        EXPECT_EQ(l.offset_of(i), covered) << i;
        EXPECT_GT(l.size_of(i), 0u) << i;
        EXPECT_LE(l.size_of(i), l.chunk) << i;
        covered += l.size_of(i);
    }
    EXPECT_EQ(covered, l.reserved);
}

}  // namespace

TEST(SwapPlan, SmallAllocationIsOneChunkOfWholeGranules)
{
    const Layout l = layout(3 * MiB, 2 * MiB);
    EXPECT_EQ(l.reserved, 4 * MiB);
    EXPECT_EQ(l.count, 1u);
    EXPECT_EQ(l.size_of(0), 4 * MiB);
    expect_tiles(l);
}

TEST(SwapPlan, LargeAllocationIsCutIntoChunksWithTheRestLast)
{
    const Layout l = layout(3 * kMaxChunk + 8 * MiB + 1, 2 * MiB);
    EXPECT_EQ(l.reserved, 3 * kMaxChunk + 10 * MiB);
    EXPECT_EQ(l.chunk, kMaxChunk);
    EXPECT_EQ(l.count, 4u);
    EXPECT_EQ(l.size_of(3), 10 * MiB);
    expect_tiles(l);
    const Layout exact = layout(2 * kMaxChunk, 2 * MiB);
    EXPECT_EQ(exact.count, 2u);
    EXPECT_EQ(exact.size_of(1), kMaxChunk);
    expect_tiles(exact);
}

TEST(SwapPlan, LargeGpusGetLargeChunks)
{
    constexpr uint64_t GiB = 1024 * MiB;
    EXPECT_EQ(max_chunk_for(16 * GiB), kMaxChunk);
    EXPECT_EQ(max_chunk_for(63 * GiB), kMaxChunk);
    EXPECT_EQ(max_chunk_for(64 * GiB), kLargeChunk);
    EXPECT_EQ(max_chunk_for(140 * GiB), kLargeChunk);
    const Layout l = layout(3 * kLargeChunk + 3 * MiB, 2 * MiB, kLargeChunk);
    EXPECT_EQ(l.chunk, kLargeChunk);
    EXPECT_EQ(l.count, 4u);
    expect_tiles(l);
}

TEST(SwapPlan, ChunksOfAPowerOfTwoAreAlignedToTheirSize)
{
    EXPECT_EQ(layout(3 * kLargeChunk, 2 * MiB, kLargeChunk).alignment(), kLargeChunk);
    EXPECT_EQ(layout(3 * kMaxChunk, 2 * MiB).alignment(), kMaxChunk);
    EXPECT_EQ(layout(64 * MiB, 2 * MiB).alignment(), 64 * MiB);
    EXPECT_EQ(layout(40 * MiB, 2 * MiB).alignment(), 0u);  // the granularity will do
}

TEST(SwapPlan, ChunkFollowsTheGranularity)
{
    // A granularity above the largest chunk: one granule a chunk.
    const Layout big = layout(300 * MiB, 128 * MiB, 64 * MiB);
    EXPECT_EQ(big.chunk, 128 * MiB);
    EXPECT_EQ(big.reserved, 384 * MiB);
    EXPECT_EQ(big.count, 3u);
    expect_tiles(big);
    // A largest chunk that is no multiple of the granularity is rounded down.
    const Layout odd = layout(100 * MiB, 2 * MiB, 5 * MiB);
    EXPECT_EQ(odd.chunk, 4 * MiB);
    expect_tiles(odd);
}

TEST(SwapPlan, UnusableRequestsHaveNoLayout)
{
    EXPECT_EQ(layout(0, 2 * MiB).count, 0u);
    EXPECT_EQ(layout(MiB, 0).count, 0u);
    EXPECT_EQ(layout(MiB, 3 * MiB).count, 0u);             // not a power of two
    EXPECT_EQ(layout(UINT64_MAX - 5, 2 * MiB).count, 0u);  // rounding overflows
}

TEST(SwapPlan, HybridRule)
{
    BackingFacts f;
    f.bytes = 64 * MiB;
    f.granularity = 2 * MiB;
    EXPECT_EQ(choose_backing(f), Backing::Swappable);
    BackingFacts off = f;
    off.engine_on = false;
    EXPECT_EQ(choose_backing(off), Backing::Managed);
    BackingFacts unsupported = f;
    unsupported.gpu_supports = false;
    EXPECT_EQ(choose_backing(unsupported), Backing::Managed);
    BackingFacts larger_than_gpu = f;
    larger_than_gpu.beyond_capacity = true;  // the driver pages a process bigger than the GPU
    EXPECT_EQ(choose_backing(larger_than_gpu), Backing::Managed);
    BackingFacts small = f;
    small.bytes = 2 * MiB - 1;  // would waste most of a granule: a block of a slab
    EXPECT_EQ(choose_backing(small), Backing::Small);
    small.bytes = 1;
    EXPECT_EQ(choose_backing(small), Backing::Small);
    small.engine_on = false;  // the fallback as for any other size
    EXPECT_EQ(choose_backing(small), Backing::Managed);
    small.engine_on = true;
    small.bytes = 2 * MiB;
    EXPECT_EQ(choose_backing(small), Backing::Swappable);
    BackingFacts no_granularity = f;
    no_granularity.granularity = 0;
    EXPECT_EQ(choose_backing(no_granularity), Backing::Managed);
}

TEST(SwapPlan, SmallSlabsAreWholeGranules)
{
    EXPECT_EQ(small_slab(2 * MiB), nvshare::preload::tuning::kSmallSlab);
    EXPECT_EQ(small_slab(64 << 10), nvshare::preload::tuning::kSmallSlab);
    EXPECT_EQ(small_slab(32 * MiB), 32 * MiB);  // at least one granule
    EXPECT_EQ(small_slab(3 * MiB), 0u);         // not a power of two
    EXPECT_EQ(small_slab(0), 0u);
}

TEST(SwapPlan, BudgetAdmitsWhileItFits)
{
    Budget b(10);
    EXPECT_TRUE(b.take(4));
    EXPECT_TRUE(b.take(6));
    EXPECT_FALSE(b.take(1));
    EXPECT_EQ(b.left(), 0u);
    Budget all(UINT64_MAX);
    EXPECT_TRUE(all.take(UINT64_MAX - 1));
    Budget none(0);
    EXPECT_FALSE(none.take(1));
    EXPECT_TRUE(none.take(0));
}

// Host memory made ahead of Shrink rounds is for the chunks they move
// first: the last of the engine's newest-first walk that fit the step.
TEST(SwapPlan, LastFitKeepsTheLastItemsThatFit)
{
    nvshare::preload::swap_plan::LastFit<int, 4> last(10);
    for (int i = 0; i < 8; ++i)
        last.push(i, 3);
    ASSERT_EQ(last.count(), 3u);  // 9 of 10 bytes
    EXPECT_EQ(last.at(0), 5);
    EXPECT_EQ(last.at(2), 7);
    EXPECT_EQ(last.size_at(1), 3u);
    EXPECT_TRUE(last.dropped());

    // At most N, however small the items.
    nvshare::preload::swap_plan::LastFit<int, 4> many(UINT64_MAX);
    for (int i = 0; i < 6; ++i)
        many.push(i, 1);
    ASSERT_EQ(many.count(), 4u);
    EXPECT_EQ(many.at(0), 2);
    EXPECT_EQ(many.at(3), 5);
    EXPECT_TRUE(many.dropped());

    // At least one, however large; nothing dropped where all fit.
    nvshare::preload::swap_plan::LastFit<int, 4> big(10);
    big.push(1, 4);
    big.push(2, 20);
    ASSERT_EQ(big.count(), 1u);
    EXPECT_EQ(big.at(0), 2);
    nvshare::preload::swap_plan::LastFit<int, 4> fits(10);
    fits.push(1, 4);
    fits.push(2, 6);
    EXPECT_EQ(fits.count(), 2u);
    EXPECT_FALSE(fits.dropped());
    nvshare::preload::swap_plan::LastFit<int, 4> empty(10);
    EXPECT_EQ(empty.count(), 0u);
    EXPECT_FALSE(empty.dropped());
}

// A switch leaves what nvshared allows, but no more than leaves a next
// holder as much room as we use; "nobody needs the room" keeps everything.
TEST(SwapPlan, KeepLeavesANextHolderAsMuchRoomAsWeUse)
{
    EXPECT_EQ(keep_beside_as_big(100 * MiB, 512 * MiB, 384 * MiB), 100 * MiB);
    EXPECT_EQ(keep_beside_as_big(240 * MiB, 512 * MiB, 384 * MiB), 128 * MiB);
    EXPECT_EQ(keep_beside_as_big(240 * MiB, 512 * MiB, 600 * MiB), 0u);
    EXPECT_EQ(keep_beside_as_big(UINT64_MAX, 512 * MiB, 384 * MiB), UINT64_MAX);
}

// What stays at a release, decided in one place: what nvshared allows, the
// swap engine's part less the headroom for contexts and the driver (1/32 of
// the GPU, at most 2 GiB); nothing with NVSHARE_EVICT=1; everything where
// nobody needs the room.
TEST(SwapPlan, WhatStaysAtAReleaseIsTheAllowanceLessTheHeadroom)
{
    constexpr uint64_t GiB = 1ull << 30;
    const auto small = kept_at_release(10 * GiB, 16 * GiB, false);
    EXPECT_EQ(small.total, 10 * GiB);
    EXPECT_EQ(small.engine, 10 * GiB - 512 * MiB - 64 * MiB);  // and the driver's room
    const auto large = kept_at_release(100 * GiB, 141 * GiB, false);
    EXPECT_EQ(large.engine, 98 * GiB - 256 * MiB);  // both ceilings
    EXPECT_EQ(kept_at_release(256 * MiB, 16 * GiB, false).engine, 0u);
    const auto all = kept_at_release(10 * GiB, 16 * GiB, true);
    EXPECT_EQ(all.total, 0u);
    EXPECT_EQ(all.engine, 0u);
    const auto nobody = kept_at_release(UINT64_MAX, 16 * GiB, false);
    EXPECT_EQ(nobody.total, UINT64_MAX);
    EXPECT_EQ(nobody.engine, UINT64_MAX);
}

// A placement leaves a 256th of the GPU (at most 256 MiB) free for the
// driver, and a release leaves that room besides its headroom, so that the
// next holder's swap-in does not meet it.
TEST(SwapPlan, APlacementLeavesTheDriversRoom)
{
    constexpr uint64_t GiB = 1ull << 30;
    EXPECT_EQ(driver_reserve(16 * GiB), 64 * MiB);
    EXPECT_EQ(driver_reserve(141 * GiB), 256 * MiB);
    EXPECT_TRUE(leaves_driver_reserve(512 * MiB, 768 * MiB, 141 * GiB));
    EXPECT_FALSE(leaves_driver_reserve(512 * MiB, 768 * MiB - 1, 141 * GiB));
    EXPECT_FALSE(leaves_driver_reserve(512 * MiB, 256 * MiB, 141 * GiB));
    EXPECT_TRUE(leaves_driver_reserve(64 * MiB, 128 * MiB, 16 * GiB));
}

// The better of the last two moves of 1 GiB or more, the assumed rate
// standing in for the move before the first: one slow move does not set the
// rate alone, a bus slow every time shows from the second move on.
TEST(SwapPlan, RateIsTheBetterOfTheLastTwoMoves)
{
    constexpr uint64_t GiB = 1ull << 30;
    RateEstimate r;
    EXPECT_EQ(r.get(40e9), 40e9);
    r.add(512 * MiB, 1000000);  // too short to say
    EXPECT_EQ(r.get(40e9), 40e9);
    r.add(10 * GiB, 2000000000);  // 5.4 GB/s: one slow move
    EXPECT_EQ(r.get(40e9), 40e9);
    r.add(10 * GiB, 200000000);  // 54 GB/s
    EXPECT_NEAR(r.get(40e9), 53.7e9, 0.1e9);
    r.add(10 * GiB, 2000000000);  // slow once more: the fast one stands
    EXPECT_NEAR(r.get(40e9), 53.7e9, 0.1e9);
    r.add(10 * GiB, 1000000000);  // slow twice in a row: 10.7 GB/s
    EXPECT_NEAR(r.get(40e9), 10.7e9, 0.1e9);
    RateEstimate slow_bus;  // 12 GB/s every time
    slow_bus.add(12 * GiB, 1073741824);
    slow_bus.add(12 * GiB, 1073741824);
    EXPECT_NEAR(slow_bus.get(40e9), 12e9, 0.1e9);
    r.add(GiB, 0);  // no time: no rate
    EXPECT_NEAR(r.get(40e9), 10.7e9, 0.1e9);
}

// ---- host budget -----------------------------------------------------------------------

namespace host_budget = nvshare::preload::host_budget;

constexpr uint64_t kGiB = 1ull << 30;

TEST(SwapPlan, PiecesAreSummedIntoSamplesOfARate)
{
    SummedRate r;
    constexpr uint64_t kChunk = 512ull << 20;
    r.add(kChunk, 20'000'000);  // half a sample: nothing measured yet
    EXPECT_EQ(r.get(10e9), 10e9);
    r.add(kChunk, 30'000'000);  // 1 GiB in 50 ms
    EXPECT_NEAR(r.get(10e9), 1073741824.0 / 0.05, 1.0);
    EXPECT_NEAR(r.get(40e9), 40e9, 1.0) << "one sample: the assumed rate stands for the other";
    r.add(2 * kChunk, 200'000'000);  // 1 GiB in 200 ms: a second, slower sample
    EXPECT_NEAR(r.get(40e9), 1073741824.0 / 0.05, 1.0) << "the better of the last two";
    r.add(3 * kChunk, 300'000'000);  // 1.5 GiB in 300 ms
    EXPECT_NEAR(r.get(40e9), 1610612736.0 / 0.3, 1.0) << "the older sample is gone";
}

TEST(HostBudget, ReadsTotalAndAvailableFromMeminfo)
{
    const std::string text =
        "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   "
        "65536000 kB\nBuffers:  12 kB\n";
    const host_budget::Figures f = host_budget::parse_meminfo(text.data(), text.size());
    EXPECT_TRUE(f.known);
    EXPECT_EQ(f.total, 131072000ull * 1024);
    EXPECT_EQ(f.available, 65536000ull * 1024);
}

TEST(HostBudget, UnknownFiguresPinWithoutLimit)
{
    for (const std::string& text : {std::string(), std::string("MemTotal: 100 kB\n"),
                                    std::string("MemTotal: 100 kB\nMemAvailable: kB\n"),
                                    std::string("MemTotal: 100 kB\nMemAvail")}) {
        const host_budget::Figures f = host_budget::parse_meminfo(text.data(), text.size());
        EXPECT_FALSE(f.known) << text;
        EXPECT_EQ(host_budget::pinnable(f), UINT64_MAX) << text;
        EXPECT_FALSE(host_budget::low(f)) << text;
    }
}

TEST(HostBudget, PinsAQuarterOfWhatIsAvailableAboveTheReserve)
{
    host_budget::Figures f{128 * kGiB, 64 * kGiB, true};
    EXPECT_EQ(host_budget::reserve(f.total), 4 * kGiB);
    EXPECT_EQ(host_budget::pinnable(f), 15 * kGiB);
    EXPECT_FALSE(host_budget::low(f));
    f.available = 15 * kGiB;  // below 1/8 (16 GiB)
    EXPECT_TRUE(host_budget::low(f));
    EXPECT_EQ(host_budget::pinnable(f), 11 * kGiB / 4);
    f.available = 4 * kGiB;
    EXPECT_EQ(host_budget::pinnable(f), 0u) << "the reserve stays available";
    // A small host keeps at least 1 GiB, and runs low below twice that.
    const host_budget::Figures small{8 * kGiB, 2 * kGiB - 1, true};
    EXPECT_EQ(host_budget::reserve(small.total), kGiB);
    EXPECT_TRUE(host_budget::low(small));
    EXPECT_EQ(host_budget::pinnable(small), (kGiB - 1) / 4);
}
