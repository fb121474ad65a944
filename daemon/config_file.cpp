#include "daemon/config_file.h"

#include "daemon/log.h"
#include "daemon/files.h"

namespace nvshare::daemon {

std::optional<SettingsLayer> load_config_file(const std::string& path, bool required)
{
    std::string error;
    const auto text = read_file(path, &error);
    if (!text) {
        if (!error.empty()) {
            NVS_ERROR("%s", error.c_str());
            return std::nullopt;
        }
        if (required) {
            NVS_ERROR("config file %s does not exist", path.c_str());
            return std::nullopt;
        }
        return SettingsLayer{};
    }
    ConfigParse parsed = parse_config(*text);
    for (const std::string& e : parsed.errors)
        NVS_WARN("%s: %s; ignored", path.c_str(), e.c_str());
    return parsed.layer;
}

}  // namespace nvshare::daemon
