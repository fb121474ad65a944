// Our share of what a switch costs, for how long an idle holder keeps the
// lock before letting go (IdleGaps::hold_for). Pure arithmetic: what moves
// and how fast in, nanoseconds out (residency.cpp gathers the inputs).
//
// Our half of the round trip: our data out and back in. The next holder
// pays as much (it brings in what takes our room and moves it out when we
// come back), out of its own pause or of a quantum's end, which would switch
// anyway. Where only the swap engine's memory moves, our copies out overlap
// the next holder's copies in (and its out ours in, on the way back): the
// engine's part costs the longer of the two, not their sum (where the
// driver's memory moves too, the copies do not overlap). Host memory not
// made ahead yet is pinned as our swap-out goes, and counts too.
#pragma once

#include <cstdint>

namespace nvshare::preload::swap {

// What one GPU has, what stays on it when we let go, and the rates (bytes
// per second, measured or assumed) its moves go at.
struct GpuShare {
    int64_t managed = 0;         // the process's device memory, the engine's included
    uint64_t engine = 0;         // the swap engine's memory on the device
    uint64_t engine_total = 0;   // the swap engine's memory, on the device or not
    uint64_t keep = 0;           // bytes that stay (swap_plan::Kept::total)
    uint64_t engine_kept = 0;    // of which the engine's (swap_plan::Kept::engine)
    uint64_t unstaged = 0;       // host memory still to make for the engine's swap-out
    double evict_rate = 0;       // the driver's eviction of the rest
    double swap_in_rate = 0;     // and its way back
    double engine_out_rate = 0;  // the engine's copies out
    double engine_in_rate = 0;   // and in
    double pin_rate = 0;         // making host memory
};

// Our share of a switch: the most any GPU's moves take, plus the longest
// pinning of host memory not made ahead (also in *pinning_ns, if given).
// Rates must be > 0.
uint64_t switch_share_ns(const GpuShare* gpus, uint32_t count, uint64_t* pinning_ns = nullptr);

}  // namespace nvshare::preload::swap
