#include "daemon/gpu_table.h"

#include <utility>

namespace nvshare::daemon {

std::optional<GpuTable::Found> GpuTable::ensure(const GpuDescription& description)
{
    if (const auto g = find(description.uuid)) {
        Gpu& gpu = gpus_[*g];
        gpu.listed_by_host = true;
        if (gpu.description.name.empty())
            gpu.description.name = description.name;
        bool capacity_set = false;
        if (description.physical_memory != 0)
            capacity_set = set_memory_size(*g, description.physical_memory, true);
        return Found{*g, false, capacity_set};
    }
    const auto g = add(description);
    if (!g)
        return std::nullopt;
    gpus_[*g].listed_by_host = true;
    gpus_[*g].memory_confirmed = description.physical_memory != 0;
    return Found{*g, true};
}

std::optional<GpuTable::Found> GpuTable::claim(const GpuDescription& description, uint32_t uid,
                                               uint32_t principal, std::string* refusal)
{
    const uint64_t claimed = description.physical_memory;
    if (claimed < kMinGpuMemory || claimed > kMaxReportedBytes) {
        *refusal =
            "implausible memory size " + std::to_string(claimed) + " for " + description.uuid;
        return std::nullopt;
    }
    if (const auto g = find(description.uuid)) {
        Gpu& gpu = gpus_[*g];
        if (gpu.description.name.empty())
            gpu.description.name = description.name;
        // A GPU's size is a fact of the host (NVML, at discovery) or of
        // root's word; a user's claim only stands in until one of those
        // comes, and only the first: a later one, smaller or larger, would
        // let a user set what every other process sees (issue 47).
        bool capacity_set = false;
        if (!gpu.memory_confirmed && (uid == 0 || gpu.description.physical_memory == 0))
            capacity_set = set_memory_size(*g, claimed, uid == 0);
        return Found{*g, false, capacity_set};
    }
    if (uid != 0) {
        size_t named = 0;
        for (const Gpu& gpu : gpus_)
            named += !gpu.listed_by_host && gpu.named_by == principal;
        if (named >= kMaxUnlistedGpusPerUser) {
            *refusal = description.uuid + " is not a GPU the host lists, and user " +
                       std::to_string(principal) + " has named " + std::to_string(named) +
                       " such GPUs already";
            return std::nullopt;
        }
    }
    const auto g = add(description);
    if (!g) {
        *refusal = "too many GPUs on this host";
        return std::nullopt;
    }
    gpus_[*g].named_by = principal;
    gpus_[*g].memory_confirmed = uid == 0;
    return Found{*g, true};
}

void GpuTable::set_capacity_override(const std::string& uuid, uint64_t bytes)
{
    capacities_[uuid] = bytes;
}

void GpuTable::set_default_capacity(std::optional<uint64_t> bytes)
{
    default_capacity_ = bytes;
}

bool GpuTable::set_capacity(GpuIndex gpu, uint64_t bytes)
{
    if (gpu >= gpus_.size())
        return false;
    gpus_[gpu].capacity = bytes;
    capacities_[gpus_[gpu].description.uuid] = bytes;
    return true;
}

void GpuTable::set_mode(const std::string& uuid, std::optional<Mode> mode)
{
    if (mode)
        modes_[uuid] = *mode;
    else
        modes_.erase(uuid);
}

void GpuTable::set_time_quantum(const std::string& uuid, std::optional<Duration> tq)
{
    if (tq)
        quanta_[uuid] = *tq;
    else
        quanta_.erase(uuid);
}

Mode GpuTable::mode_of(GpuIndex gpu, Mode host_wide) const
{
    if (gpu < gpus_.size())
        if (const auto it = modes_.find(gpus_[gpu].description.uuid); it != modes_.end())
            return it->second;
    return host_wide;
}

Duration GpuTable::time_quantum_of(GpuIndex gpu, Duration host_wide) const
{
    if (gpu < gpus_.size())
        if (const auto it = quanta_.find(gpus_[gpu].description.uuid); it != quanta_.end())
            return it->second;
    return host_wide;
}

std::optional<GpuIndex> GpuTable::find(const std::string& uuid) const
{
    for (GpuIndex g = 0; g < gpus_.size(); ++g)
        if (gpus_[g].description.uuid == uuid)
            return g;
    return std::nullopt;
}

std::optional<GpuIndex> GpuTable::add(const GpuDescription& description)
{
    if (gpus_.size() >= kMaxGpus)
        return std::nullopt;
    Gpu gpu;
    gpu.description = description;
    if (const auto it = capacities_.find(description.uuid); it != capacities_.end())
        gpu.capacity = it->second;
    else if (default_capacity_)
        gpu.capacity = *default_capacity_;
    else
        gpu.capacity = description.physical_memory;
    gpus_.push_back(std::move(gpu));
    return static_cast<GpuIndex>(gpus_.size() - 1);
}

bool GpuTable::capacity_follows_size(GpuIndex gpu) const
{
    return !default_capacity_ && capacities_.count(gpus_[gpu].description.uuid) == 0;
}

bool GpuTable::set_memory_size(GpuIndex gpu, uint64_t bytes, bool confirmed)
{
    gpus_[gpu].description.physical_memory = bytes;
    gpus_[gpu].memory_confirmed = confirmed;
    if (!capacity_follows_size(gpu))
        return false;
    gpus_[gpu].capacity = bytes;
    return true;
}

}  // namespace nvshare::daemon
