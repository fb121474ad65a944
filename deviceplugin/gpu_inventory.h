// Which GPUs the plugin advertises and whether each is healthy. It
// advertises the GPUs the driver lists: nvshared's list also holds GPUs its
// clients report, which any local user can make up, and those must not
// become schedulable capacity of the node. A GPU is healthy while nvshared
// answers and lists it: only then do the containers given it take turns.
// nvshared not answering makes every GPU unhealthy (the kubelet then places
// no new pods on them; running ones keep going, their library reconnects
// when nvshared is back). GPUs are never dropped once seen, so device IDs
// stay stable while the driver reloads.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace nvshare::deviceplugin {

struct GpuHealth {
    std::string uuid;
    bool healthy = false;
    bool operator==(const GpuHealth&) const = default;
};

class GpuInventory {
public:
    // One look: the daemon's GPU UUIDs (nullopt: it did not answer) and the
    // driver's. Returns every GPU the driver has listed so far, in the
    // order first seen.
    std::vector<GpuHealth> update(const std::optional<std::vector<std::string>>& daemon_gpus,
                                  const std::vector<std::string>& driver_gpus);

private:
    std::vector<std::string> known_;
};

// The GPU UUIDs in nvshared's status; nullopt (and *error) when it does not
// answer on `socket` or answers something else.
std::optional<std::vector<std::string>> daemon_gpus(const std::string& socket, std::string* error);
// The GPU UUIDs the driver lists under `dir` (common/driver_gpus.h).
std::vector<std::string> driver_gpu_uuids(const std::string& dir);

}  // namespace nvshare::deviceplugin
