#include "deviceplugin/gpu_inventory.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/driver_gpus.h"
#include "common/lock_client.h"

namespace nvshare::deviceplugin {

std::vector<GpuHealth> GpuInventory::update(
    const std::optional<std::vector<std::string>>& daemon_gpus,
    const std::vector<std::string>& driver_gpus)
{
    for (const std::string& u : driver_gpus)
        if (std::find(known_.begin(), known_.end(), u) == known_.end())
            known_.push_back(u);
    std::vector<GpuHealth> out;
    for (const std::string& u : known_)
        out.push_back({u, daemon_gpus && std::find(daemon_gpus->begin(), daemon_gpus->end(), u) !=
                                             daemon_gpus->end()});
    return out;
}

std::optional<std::vector<std::string>> daemon_gpus(const std::string& socket, std::string* error)
{
    const std::string text = LockClient::query_status(socket, error);
    if (text.empty())
        return std::nullopt;
    const auto status = nlohmann::json::parse(text, nullptr, false);
    if (!status.is_object() || !status.contains("gpus") || !status["gpus"].is_array()) {
        *error = "nvshared's status has no GPU list";
        return std::nullopt;
    }
    std::vector<std::string> uuids;
    for (const auto& gpu : status["gpus"])
        if (gpu.is_object() && gpu.contains("uuid") && gpu["uuid"].is_string())
            uuids.push_back(gpu["uuid"].get<std::string>());
    return uuids;
}

std::vector<std::string> driver_gpu_uuids(const std::string& dir)
{
    std::vector<std::string> uuids;
    for (const auto& gpu : nvshare::driver_gpus(dir))
        uuids.push_back(gpu.uuid);
    return uuids;
}

}  // namespace nvshare::deviceplugin
