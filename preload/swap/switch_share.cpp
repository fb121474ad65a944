#include "preload/swap/switch_share.h"

namespace nvshare::preload::swap {

uint64_t switch_share_ns(const GpuShare* gpus, uint32_t count, uint64_t* pinning_ns)
{
    double most = 0, pinning = 0;
    for (uint32_t i = 0; i < count; ++i) {
        const GpuShare& g = gpus[i];
        const double pin = static_cast<double>(g.unstaged) / g.pin_rate;
        pinning = pin > pinning ? pin : pinning;
        // The swap engine's memory stays first (as before_release keeps it).
        const uint64_t engine_moved = g.engine > g.engine_kept ? g.engine - g.engine_kept : 0;
        const uint64_t keep_left = g.keep > g.engine ? g.keep - g.engine : 0;
        const int64_t managed = g.managed - static_cast<int64_t>(g.engine_total);
        const uint64_t m = managed > 0 ? static_cast<uint64_t>(managed) : 0;
        const double moved = static_cast<double>(m > keep_left ? m - keep_left : 0);
        const double engine_out_s = static_cast<double>(engine_moved) / g.engine_out_rate;
        const double engine_in_s = static_cast<double>(engine_moved) / g.engine_in_rate;
        // Only the engine's memory moves: its copies overlap the next holder's.
        const double engine_s = m == 0 ? (engine_out_s > engine_in_s ? engine_out_s : engine_in_s)
                                       : engine_out_s + engine_in_s;
        const double ours = moved / g.evict_rate + moved / g.swap_in_rate + engine_s;
        most = ours > most ? ours : most;
    }
    if (pinning_ns != nullptr)
        *pinning_ns = static_cast<uint64_t>(pinning * 1e9);
    return static_cast<uint64_t>((most + pinning) * 1e9);
}

}  // namespace nvshare::preload::swap
