#include "daemon/host_readings.h"

namespace nvshare::daemon {

bool WatchSet::add(const std::string& gpu, int32_t pid)
{
    const bool new_gpu = gpus.insert(gpu).second;
    return pids.insert(pid).second || new_gpu;
}

bool needs_confirming(const ClientInfo& client, const MemoryUse& use)
{
    return client.uid != 0 && (use.pinned != 0 || use.managed != 0);
}

ReadingChanges reading_changes(const std::map<ClientId, ClientRecord>& clients,
                               const std::vector<Gpu>& gpus, const HostReadings& readings)
{
    ReadingChanges out;
    for (const auto& [id, c] : clients) {
        if (c.info.uid == 0)
            continue;  // confirmed whole
        if (const auto h = readings.host.find(c.info.pid);
            h != readings.host.end() && h->second != c.host_resident)
            out.host.push_back({id, h->second});
        for (const auto& [g, use] : c.memory) {
            if (needs_confirming(c.info, use))
                out.watch.add(gpus[g].description.uuid, c.info.pid);
            const auto r = readings.gpus.find(gpus[g].description.uuid);
            if (r == readings.gpus.end())
                continue;
            // A process NVML does not list has no memory there it confirms.
            std::optional<uint64_t> confirmed;
            if (r->second) {
                const auto p = r->second->find(c.info.pid);
                confirmed = p == r->second->end() ? 0 : p->second;
            }
            const auto was = c.host_confirms.find(g);
            const std::optional<uint64_t> before =
                was == c.host_confirms.end() ? std::nullopt : std::optional<uint64_t>(was->second);
            if (before != confirmed)
                out.gpus.push_back({id, g, confirmed});
        }
    }
    for (GpuIndex g = 0; g < gpus.size(); ++g)
        if (const auto r = readings.gpus.find(gpus[g].description.uuid); r != readings.gpus.end())
            out.counts_processes.emplace_back(g, r->second.has_value());
    return out;
}

}  // namespace nvshare::daemon
