#include "daemon/status.h"

#include <algorithm>

#include "build-config.h"
#include "common/mode.h"
#include "daemon/client_facts.h"

namespace nvshare::daemon {

nlohmann::json status_json(const Scheduler& scheduler, size_t connections, TimePoint now)
{
    using nlohmann::json;
    const auto& s = scheduler.settings();
    json clients = json::array();
    for (const auto& [id, c] : scheduler.clients()) {
        json gpus = json::array();
        for (GpuIndex g : c.gpus)
            gpus.push_back(g);
        const ClientFacts f = client_facts(scheduler, c, now);
        clients.push_back({{"id", id},
                           {"pid", c.info.pid},
                           {"uid", c.info.uid},
                           {"comm", c.info.comm},
                           {"cgroup", c.info.cgroup},
                           {"command", c.info.command},
                           {"priority", proto::priority_name(c.info.priority)},
                           {"gpus", gpus},
                           {"state", f.state},
                           {"memory", f.memory},
                           {"pinned_memory", f.pinned},
                           {"confirmed_pinned_memory", f.confirmed_pinned},
                           {"confirmed_memory", f.confirmed},
                           {"held_us", to_usec(f.held)},
                           {"waited_us", to_usec(f.waited)},
                           {"quantum_left_us", to_usec(f.quantum_left)},
                           {"queue_position", f.wait_place},
                           {"wait_reason", f.wait_reason},
                           {"grants", c.grants},
                           {"drops", c.drops},
                           {"revocations", c.revocations},
                           {"bytes_prefetched", f.swaps.bytes_prefetched},
                           {"bytes_evicted", f.swaps.bytes_evicted},
                           {"swap_ins", f.swaps.swap_ins},
                           {"swap_in_us", to_usec(f.swaps.swap_in_time)},
                           {"swap_outs", f.swaps.swap_outs},
                           {"swap_out_us", to_usec(f.swaps.swap_out_time)}});
    }
    json gpus = json::array();
    for (GpuIndex g = 0; g < scheduler.gpus().size(); ++g) {
        const Gpu& gpu = scheduler.gpus()[g];
        gpus.push_back(
            {{"index", g},
             {"uuid", gpu.description.uuid},
             {"name", gpu.description.name},
             {"physical_memory", gpu.description.physical_memory},
             {"capacity", gpu.capacity},
             {"mode", proto::mode_name(scheduler.mode_of(g))},
             {"own_mode", scheduler.gpu_modes().contains(gpu.description.uuid)},
             {"time_quantum_us", to_usec(scheduler.time_quantum_of(g))},
             {"own_time_quantum", scheduler.gpu_time_quanta().contains(gpu.description.uuid)},
             {"requested_memory", scheduler.requested_memory(g)},
             {"serializing", scheduler.serializing(g)},
             {"holders", gpu.holders},
             {"queue", scheduler.queue(g)},
             {"grants", gpu.grants},
             {"oversubscribed", scheduler.oversubscribed(g)},
             {"last_swap_in_us", to_usec(gpu.last_swap_in)},
             {"rates", rates_json(gpu.rates)}});
    }
    // Per user and GPU, exited clients included: what the metrics show.
    json usage = json::array();
    for (const auto& [key, u] : scheduler.usage(now))
        usage.push_back({{"gpu", key.gpu},
                         {"uid", key.uid},
                         {"held_us", to_usec(u.held)},
                         {"waited_us", to_usec(u.waited)},
                         {"grants", u.grants},
                         {"drops", u.drops},
                         {"revocations", u.revocations},
                         {"bytes_swapped_in", u.bytes_swapped_in},
                         {"bytes_swapped_out", u.bytes_swapped_out},
                         {"swap_in_us", to_usec(u.swap_in_time)},
                         {"swap_out_us", to_usec(u.swap_out_time)},
                         {"clients", u.clients},
                         {"waiting", u.waiting}});
    return {{"version", NVSHARE_VERSION},
            {"mode", proto::mode_name(s.mode)},
            {"time_quantum_us", to_usec(s.time_quantum)},
            {"grace_us", to_usec(s.grace)},
            {"connections", connections},
            {"clients", clients},
            {"clients_omitted", 0},
            {"gpus", gpus},
            {"usage", usage}};
}

std::string status_text(const Scheduler& scheduler, size_t connections, TimePoint now,
                        size_t max_bytes)
{
    using nlohmann::json;
    const auto render = [](const json& j) {
        return j.dump(-1, ' ', false, json::error_handler_t::replace);
    };
    json doc = status_json(scheduler, connections, now);
    std::string text = render(doc);
    auto& clients = doc["clients"];
    const size_t total = clients.size();
    while (text.size() > max_bytes && !clients.empty()) {
        // Cut in proportion to the excess, at least one entry a round.
        const size_t keep =
            std::min(clients.size() - 1, static_cast<size_t>(static_cast<double>(clients.size()) *
                                                             static_cast<double>(max_bytes) * 0.9 /
                                                             static_cast<double>(text.size())));
        clients.erase(clients.begin() + static_cast<ptrdiff_t>(keep), clients.end());
        doc["clients_omitted"] = total - clients.size();
        text = render(doc);
    }
    return text;
}

}  // namespace nvshare::daemon
