#include "metrics/unit_series.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "metrics/exposition.h"

namespace nvshare::metrics {

namespace {

struct Count {
    uint64_t clients = 0;
    uint64_t waiting = 0;
};

using Units = std::map<std::string, Count>;

// At most kMaxUnitsPerGpu units plus kOtherUnits: those with the most
// clients (then by name), the rest added up.
Units bounded(const Units& units)
{
    if (units.size() <= kMaxUnitsPerGpu)
        return units;
    std::vector<std::pair<std::string, Count>> order(units.begin(), units.end());
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return a.second.clients > b.second.clients;
    });
    Units out;
    for (size_t i = 0; i < order.size(); ++i) {
        Count& c = out[i < kMaxUnitsPerGpu ? order[i].first : kOtherUnits];
        c.clients += order[i].second.clients;
        c.waiting += order[i].second.waiting;
    }
    return out;
}

}  // namespace

std::string render_unit_series(const nlohmann::json& clients, const GpuLabels& labels)
{
    std::map<uint64_t, Units> per_gpu;
    for (const auto& c : clients) {
        const auto unit = c.at("cgroup").get<std::string>();
        const bool waiting = c.at("state").get<std::string>() == "waiting";
        for (const auto& g : c.at("gpus")) {
            Count& n = per_gpu[g.get<uint64_t>()][unit];
            ++n.clients;
            n.waiting += waiting ? 1 : 0;
        }
    }
    std::string clients_out = family_head("nvshare_unit_clients", "gauge",
                                          "The unit's clients registered for the GPU now.");
    std::string waiting_out =
        family_head("nvshare_unit_waiting", "gauge", "The unit's clients waiting for the GPU now.");
    for (const auto& [gpu, units] : per_gpu) {
        for (const auto& [unit, n] : bounded(units)) {
            const std::string l = "{" + labels(gpu) + ",unit=\"" + escape_label(unit) + "\"} ";
            clients_out += "nvshare_unit_clients" + l + std::to_string(n.clients) + "\n";
            waiting_out += "nvshare_unit_waiting" + l + std::to_string(n.waiting) + "\n";
        }
    }
    return clients_out + waiting_out;
}

}  // namespace nvshare::metrics
