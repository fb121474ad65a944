#include "daemon/client.h"

namespace nvshare::daemon {

GpuSet ClientRecord::registered() const
{
    GpuSet s = 0;
    for (GpuIndex g : gpus)
        s |= gpu_bit(g);
    return s;
}

std::optional<GpuSet> ClientRecord::to_global(uint64_t local_mask) const
{
    GpuSet s = 0;
    for (size_t i = 0; i < 64; ++i) {
        if ((local_mask >> i & 1) == 0)
            continue;
        if (i >= gpus.size())
            return std::nullopt;
        s |= gpu_bit(gpus[i]);
    }
    return s;
}

uint64_t ClientRecord::to_local(GpuSet set) const
{
    uint64_t m = 0;
    for (size_t i = 0; i < gpus.size(); ++i)
        if (set & gpu_bit(gpus[i]))
            m |= uint64_t{1} << i;
    return m;
}

}  // namespace nvshare::daemon
