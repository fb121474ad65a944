#include "preload/swap/swap_plan.h"

namespace nvshare::preload::swap_plan {

Layout layout(uint64_t bytes, uint64_t granularity, uint64_t max_chunk)
{
    Layout l;
    if (bytes == 0 || granularity == 0 || (granularity & (granularity - 1)) != 0)
        return l;
    const uint64_t reserved = (bytes + granularity - 1) & ~(granularity - 1);
    if (reserved < bytes)
        return l;  // overflow
    uint64_t chunk = max_chunk & ~(granularity - 1);
    if (chunk == 0)
        chunk = granularity;
    if (chunk > reserved)
        chunk = reserved;
    const uint64_t count = (reserved + chunk - 1) / chunk;
    if (count > UINT32_MAX)
        return l;
    l.reserved = reserved;
    l.chunk = chunk;
    l.count = static_cast<uint32_t>(count);
    return l;
}

uint64_t max_chunk_for(uint64_t physical_memory)
{
    return physical_memory / kLargeChunkShare >= kLargeChunk ? kLargeChunk : kMaxChunk;
}

Backing choose_backing(const BackingFacts& f)
{
    if (!f.engine_on || !f.gpu_supports || f.beyond_capacity || f.granularity == 0)
        return Backing::Managed;
    return f.bytes < f.granularity ? Backing::Small : Backing::Swappable;
}

uint64_t small_slab(uint64_t granularity)
{
    if (granularity == 0 || (granularity & (granularity - 1)) != 0)
        return 0;
    const uint64_t slab = tuning::kSmallSlab > granularity ? tuning::kSmallSlab : granularity;
    return (slab + granularity - 1) & ~(granularity - 1);
}

Kept kept_at_release(uint64_t allowed, uint64_t capacity, bool evict_all)
{
    if (evict_all)
        return {0, 0};
    if (allowed == UINT64_MAX)
        return {allowed, allowed};
    // Every process's contexts and the driver take device memory beside
    // what nvshared counts (tuning::kKeepHeadroomShare); the next holder's
    // placements leave the driver's room besides (leaves_driver_reserve).
    const uint64_t share = capacity / tuning::kKeepHeadroomShare;
    const uint64_t headroom =
        (share < tuning::kKeepHeadroomMax ? share : tuning::kKeepHeadroomMax) +
        driver_reserve(capacity);
    return {allowed, allowed > headroom ? allowed - headroom : 0};
}

uint64_t driver_reserve(uint64_t memory)
{
    const uint64_t share = memory / tuning::kDriverReserveShare;
    return share < tuning::kDriverReserveMax ? share : tuning::kDriverReserveMax;
}

bool leaves_driver_reserve(uint64_t size, uint64_t free, uint64_t physical)
{
    return free >= size && free - size >= driver_reserve(physical);
}

uint64_t keep_beside_as_big(uint64_t allowed, uint64_t capacity, uint64_t own)
{
    if (allowed == UINT64_MAX)
        return allowed;
    const uint64_t as_big = capacity > own ? capacity - own : 0;
    return allowed < as_big ? allowed : as_big;
}

}  // namespace nvshare::preload::swap_plan
