#include "daemon/status.h"

#include "build-config.h"

namespace nvshare::daemon {

namespace {

uint64_t usec(Duration d)
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

}  // namespace

Duration held_so_far(const Client& c, TimePoint now)
{
    return c.phase == Phase::Holding ? c.held_total + (now - c.granted_at) : c.held_total;
}

Duration waited_so_far(const Client& c, TimePoint now)
{
    return c.phase == Phase::Waiting ? c.waited_total + (now - c.waiting_since) : c.waited_total;
}

const char* phase_name(Phase p)
{
    switch (p) {
        case Phase::Idle:
            return "idle";
        case Phase::Waiting:
            return "waiting";
        case Phase::Holding:
            return "holding";
    }
    return "?";
}

nlohmann::json status_json(const Scheduler& scheduler, size_t connections, TimePoint now)
{
    using nlohmann::json;
    const auto& s = scheduler.settings();
    json clients = json::array();
    for (const auto& [id, c] : scheduler.clients()) {
        json gpus = json::array();
        uint64_t memory = 0;
        for (GpuIndex g : c.gpus)
            gpus.push_back(g);
        for (const auto& [g, m] : c.memory)
            memory += m.total();
        clients.push_back({{"id", id},
                           {"pid", c.info.pid},
                           {"uid", c.info.uid},
                           {"comm", c.info.comm},
                           {"gpus", gpus},
                           {"state", phase_name(c.phase)},
                           {"memory", memory},
                           {"held_us", usec(held_so_far(c, now))},
                           {"waited_us", usec(waited_so_far(c, now))},
                           {"grants", c.grants},
                           {"drops", c.drops},
                           {"revocations", c.revocations}});
    }
    json gpus = json::array();
    for (GpuIndex g = 0; g < scheduler.gpus().size(); ++g) {
        const Gpu& gpu = scheduler.gpus()[g];
        gpus.push_back({{"index", g},
                        {"uuid", gpu.description.uuid},
                        {"name", gpu.description.name},
                        {"physical_memory", gpu.description.physical_memory},
                        {"capacity", gpu.capacity},
                        {"requested_memory", scheduler.requested_memory(g)},
                        {"serializing", scheduler.serializing(g)},
                        {"holders", gpu.holders},
                        {"queue", scheduler.queue(g)},
                        {"grants", gpu.grants}});
    }
    return {{"version", NVSHARE_VERSION},
            {"mode", proto::mode_name(s.mode)},
            {"time_quantum_us", usec(s.time_quantum)},
            {"grace_us", usec(s.grace)},
            {"connections", connections},
            {"clients", clients},
            {"gpus", gpus}};
}

}  // namespace nvshare::daemon
