#include "daemon/gpu_discovery.h"

#include "common/driver_gpus.h"
#include "daemon/printable_text.h"

namespace nvshare::daemon {

namespace {

GpuDescription describe(const DriverGpu& g)
{
    return {g.uuid, printable_utf8(g.model), 0};
}

}  // namespace

std::optional<GpuDescription> parse_gpu_information(std::string_view text)
{
    const auto g = parse_driver_gpu(text);
    return g ? std::optional(describe(*g)) : std::nullopt;
}

std::vector<GpuDescription> discover_gpus(const std::string& dir)
{
    std::vector<GpuDescription> out;
    for (const DriverGpu& g : driver_gpus(dir))
        out.push_back(describe(g));
    return out;
}

}  // namespace nvshare::daemon
