// Gathers `nvsharectl status` over D-Bus: the manager's properties, every
// GPU object's (GetManagedObjects) and ListClients.
#include <pwd.h>

#include "cli/bus_client.h"
#include "cli/status_view.h"

namespace nvshare::cli {

namespace {

using nlohmann::json;

std::string user_name(uint32_t uid)
{
    passwd pw{};
    passwd* found = nullptr;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr)
        return found->pw_name;
    return std::to_string(uid);
}

template <typename T>
T property(const std::map<std::string, sdbus::Variant>& props, const char* name)
{
    const auto it = props.find(name);
    return it == props.end() ? T{} : it->second.get<T>();
}

json gpu_json(const std::map<std::string, sdbus::Variant>& p)
{
    using Client = sdbus::Struct<uint64_t, int32_t, uint32_t, std::string, std::string, uint64_t,
                                 uint64_t, uint64_t>;
    json clients = json::array();
    for (const auto& c : property<std::vector<Client>>(p, "Clients"))
        clients.push_back({{"id", c.get<0>()},
                           {"pid", c.get<1>()},
                           {"uid", c.get<2>()},
                           {"user", user_name(c.get<2>())},
                           {"comm", c.get<3>()},
                           {"state", c.get<4>()},
                           {"memory", c.get<5>()},
                           {"held_us", c.get<6>()},
                           {"waited_us", c.get<7>()}});
    return {{"index", property<uint32_t>(p, "Index")},
            {"uuid", property<std::string>(p, "UUID")},
            {"name", property<std::string>(p, "Name")},
            {"physical_memory", property<uint64_t>(p, "PhysicalMemory")},
            {"capacity", property<uint64_t>(p, "Capacity")},
            {"requested_memory", property<uint64_t>(p, "RequestedMemory")},
            {"serializing", property<bool>(p, "Serializing")},
            {"holders", property<std::vector<uint64_t>>(p, "Holders")},
            {"queue", property<std::vector<uint64_t>>(p, "Queue")},
            {"clients", clients}};
}

}  // namespace

json collect_status(BusClient& bus)
{
    auto& m = bus.manager();
    json clients = json::array();
    for (const auto& c : m.ListClients())
        clients.push_back({{"id", c.get<0>()},
                           {"pid", c.get<1>()},
                           {"uid", c.get<2>()},
                           {"user", user_name(c.get<2>())},
                           {"comm", c.get<3>()},
                           {"state", c.get<4>()},
                           {"gpus", c.get<5>()},
                           {"memory", c.get<6>()},
                           {"held_us", c.get<7>()},
                           {"waited_us", c.get<8>()}});
    json gpus = json::array();
    for (const auto& [path, interfaces] : bus.managed_objects())
        if (const auto it = interfaces.find(kGpuInterface); it != interfaces.end())
            gpus.push_back(gpu_json(it->second));
    std::sort(gpus.begin(), gpus.end(),
              [](const json& a, const json& b) { return a["index"] < b["index"]; });
    return {{"version", m.Version()},
            {"mode", m.AntiThrashing()},
            {"time_quantum_us", m.TimeQuantumUSec()},
            {"grace_us", m.GraceUSec()},
            {"client_count", m.ClientCount()},
            {"clients", clients},
            {"gpus", gpus}};
}

}  // namespace nvshare::cli
