// Our share of a switch (preload/swap/switch_share.h): what an idle holder
// waits out before it lets go, from what moves and how fast.
#include "preload/swap/switch_share.h"

#include <gtest/gtest.h>

namespace switch_share_test {
namespace {

using nvshare::preload::swap::GpuShare;
using nvshare::preload::swap::switch_share_ns;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// A GPU with `engine` bytes of the swap engine's memory on it (all of the
// process's memory there), none kept, at rates that tell the terms apart.
GpuShare engine_only(uint64_t engine)
{
    GpuShare g;
    g.managed = static_cast<int64_t>(engine);
    g.engine = engine;
    g.engine_total = engine;
    g.evict_rate = 16e9;
    g.swap_in_rate = 48e9;
    g.engine_out_rate = 40e9;
    g.engine_in_rate = 20e9;
    g.pin_rate = 10e9;
    return g;
}

double ns(double bytes, double rate)
{
    return bytes / rate * 1e9;
}

// Within a nanosecond or two: the sums round as they are added up.
void expect_share(const GpuShare* g, uint32_t count, double want)
{
    EXPECT_NEAR(static_cast<double>(switch_share_ns(g, count)), want, 2.0);
}

// Our copies out overlap the next holder's copies in: the longer of our way
// out and back, not their sum (which would keep a holder through pauses the
// switch would not outlast).
TEST(SwitchShare, OnlyTheEnginesMemoryCostsTheLongerOfOutAndBack)
{
    const GpuShare g = engine_only(4 * kGiB);
    expect_share(&g, 1, ns(4.0 * kGiB, 20e9));
}

TEST(SwitchShare, TheDriversMemoryAddsItsWayOutAndBack)
{
    GpuShare g = engine_only(1 * kGiB);
    g.managed = static_cast<int64_t>(3 * kGiB);  // 2 GiB the driver evicts
    const double driver = 2.0 * kGiB;
    expect_share(&g, 1,
                 ns(driver, 16e9) + ns(driver, 48e9) + ns(1.0 * kGiB, 40e9) + ns(1.0 * kGiB, 20e9));
}

// What nvshared lets stay does not move: the engine's memory is kept first,
// what is kept beyond it is of the driver's.
TEST(SwitchShare, WhatStaysDoesNotCount)
{
    GpuShare g = engine_only(512 * kMiB);
    g.keep = g.engine_kept = 232 * kMiB;  // 280 MiB move
    expect_share(&g, 1, ns(280.0 * kMiB, 20e9));
    g.keep = 512 * kMiB;
    g.engine_kept = 512 * kMiB;
    EXPECT_EQ(switch_share_ns(&g, 1), 0u);

    GpuShare d = engine_only(0);
    d.managed = static_cast<int64_t>(1 * kGiB);  // the driver's only
    d.keep = 768 * kMiB;
    const double moved = 256.0 * kMiB;
    expect_share(&d, 1, ns(moved, 16e9) + ns(moved, 48e9));
}

// Host memory not made ahead is pinned as the swap-out goes.
TEST(SwitchShare, HostMemoryNotMadeAheadCounts)
{
    GpuShare g = engine_only(512 * kMiB);
    g.unstaged = 512 * kMiB;
    expect_share(&g, 1, ns(512.0 * kMiB, 20e9) + ns(512.0 * kMiB, 10e9));
    // The part of it that makes host memory, apart: the share once it is made.
    uint64_t pinning = 1;
    switch_share_ns(&g, 1, &pinning);
    EXPECT_NEAR(static_cast<double>(pinning), static_cast<double>(ns(512.0 * kMiB, 10e9)), 2.0);
    g.unstaged = 0;
    switch_share_ns(&g, 1, &pinning);
    EXPECT_EQ(pinning, 0u);
}

// The GPUs move at once: the one that takes longest, not their sum.
TEST(SwitchShare, SeveralGpusCostTheLongest)
{
    const GpuShare g[2] = {engine_only(1 * kGiB), engine_only(2 * kGiB)};
    expect_share(g, 2, ns(2.0 * kGiB, 20e9));
    const GpuShare none{};
    EXPECT_EQ(switch_share_ns(&none, 0), 0u);
}

}  // namespace
}  // namespace switch_share_test
