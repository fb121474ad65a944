#include "metrics/gpu_labels.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

#include "metrics/exposition.h"

namespace nvshare::metrics {

namespace {

std::string label_text(uint64_t index, const std::string& uuid, const std::string& model,
                       const std::string& hostname)
{
    return "gpu=\"" + std::to_string(index) + "\",UUID=\"" + escape_label(uuid) +
           "\",modelName=\"" + escape_label(model) + "\",Hostname=\"" + escape_label(hostname) +
           "\"";
}

}  // namespace

std::string host_name()
{
    const char* node = getenv("NODE_NAME");
    if (node != nullptr && *node != '\0')
        return node;
    char name[HOST_NAME_MAX + 1] = {};
    if (gethostname(name, sizeof name - 1) != 0)
        return "";
    return name;
}

GpuLabels::GpuLabels(const nlohmann::json& gpus, const std::string& hostname) : hostname_(hostname)
{
    for (const auto& g : gpus) {
        const auto index = g.at("index").get<uint64_t>();
        labels_[index] = label_text(index, g.at("uuid").get<std::string>(),
                                    g.at("name").get<std::string>(), hostname);
    }
}

std::string GpuLabels::operator()(uint64_t index) const
{
    const auto it = labels_.find(index);
    return it != labels_.end() ? it->second : label_text(index, "", "", hostname_);
}

}  // namespace nvshare::metrics
