#include "daemon/status.h"

#include <algorithm>

#include "build-config.h"
#include "common/mode.h"

namespace nvshare::daemon {

namespace {

uint64_t usec(Duration d)
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

// Where a waiting client stands: its best place (1 = next) among the GPUs it
// waits for, and why it waits there, as the scheduler last told it.
struct WaitStanding {
    uint64_t place = 0;
    const char* reason = "";
};

WaitStanding wait_standing(const Client& c)
{
    WaitStanding w;
    if (c.phase != Phase::Waiting)
        return w;
    for (const auto& [g, f] : c.wait_sent)
        if (w.place == 0 || f.place < w.place) {
            w.place = f.place;
            w.reason = proto::wait_reason_name(f.reason);
        }
    return w;
}

}  // namespace

Duration quantum_left(const Scheduler& scheduler, const Client& c, TimePoint now)
{
    if (c.phase != Phase::Holding)
        return Duration::zero();
    const Duration left = scheduler.quantum_for(c) - (now - c.granted_at);
    return left > Duration::zero() ? left : Duration::zero();
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
        uint64_t pinned = 0;
        for (GpuIndex g : c.gpus)
            gpus.push_back(g);
        for (const auto& [g, m] : c.memory) {
            memory += m.total();
            pinned += m.pinned;
        }
        // What nvshare's bulk migration moved for this client, all GPUs.
        SwapStats sw;
        for (const auto& [g, x] : c.swaps) {
            sw.bytes_prefetched += x.bytes_prefetched;
            sw.bytes_evicted += x.bytes_evicted;
            sw.swap_ins += x.swap_ins;
            sw.swap_in_time += x.swap_in_time;
            sw.swap_outs += x.swap_outs;
            sw.swap_out_time += x.swap_out_time;
        }
        const WaitStanding wait = wait_standing(c);
        clients.push_back({{"id", id},
                           {"pid", c.info.pid},
                           {"uid", c.info.uid},
                           {"comm", c.info.comm},
                           {"cgroup", c.info.cgroup},
                           {"gpus", gpus},
                           {"state", phase_name(c.phase)},
                           {"memory", memory},
                           {"pinned_memory", pinned},
                           {"held_us", usec(held_so_far(c, now))},
                           {"waited_us", usec(waited_so_far(c, now))},
                           {"quantum_left_us", usec(quantum_left(scheduler, c, now))},
                           {"queue_position", wait.place},
                           {"wait_reason", wait.reason},
                           {"grants", c.grants},
                           {"drops", c.drops},
                           {"revocations", c.revocations},
                           {"bytes_prefetched", sw.bytes_prefetched},
                           {"bytes_evicted", sw.bytes_evicted},
                           {"swap_ins", sw.swap_ins},
                           {"swap_in_us", usec(sw.swap_in_time)},
                           {"swap_outs", sw.swap_outs},
                           {"swap_out_us", usec(sw.swap_out_time)}});
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
                        {"grants", gpu.grants},
                        {"oversubscribed", scheduler.oversubscribed(g)},
                        {"last_swap_in_us", usec(gpu.last_swap_in)}});
    }
    // Per user and GPU, exited clients included: what the metrics show.
    json usage = json::array();
    for (const auto& [key, u] : scheduler.usage(now))
        usage.push_back({{"gpu", key.gpu},
                         {"uid", key.uid},
                         {"held_us", usec(u.held)},
                         {"waited_us", usec(u.waited)},
                         {"grants", u.grants},
                         {"drops", u.drops},
                         {"revocations", u.revocations},
                         {"bytes_swapped_in", u.bytes_swapped_in},
                         {"bytes_swapped_out", u.bytes_swapped_out},
                         {"swap_in_us", usec(u.swap_in_time)},
                         {"swap_out_us", usec(u.swap_out_time)},
                         {"clients", u.clients},
                         {"waiting", u.waiting}});
    return {{"version", NVSHARE_VERSION},
            {"mode", proto::mode_name(s.mode)},
            {"time_quantum_us", usec(s.time_quantum)},
            {"grace_us", usec(s.grace)},
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
