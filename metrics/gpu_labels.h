// The labels that name a GPU on every per-GPU series, with the names and
// values NVIDIA's DCGM exporter gives them, so that the two join:
// gpu (the index), UUID, modelName and Hostname.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace nvshare::metrics {

// The host's name as DCGM exporter takes it: $NODE_NAME where set and not
// empty, else gethostname(2); empty where neither gives one.
std::string host_name();

// GPU index (nvshared's) -> its label text, without braces:
// gpu="0",UUID="GPU-…",modelName="…",Hostname="…".
class GpuLabels {
public:
    // From the status document's "gpus".
    GpuLabels(const nlohmann::json& gpus, const std::string& hostname);

    // The labels of GPU `index`; one the document did not list gets its
    // index and the host name, and empty UUID and modelName.
    std::string operator()(uint64_t index) const;

private:
    std::map<uint64_t, std::string> labels_;
    std::string hostname_;
};

}  // namespace nvshare::metrics
