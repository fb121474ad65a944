#include "daemon/config_file.h"

#include <grp.h>
#include <pwd.h>

#include "daemon/files.h"
#include "daemon/log.h"

namespace nvshare::daemon {

namespace {

// The names of priority rules, as the system's databases (NSS) know them
// when the file is loaded.
NameLookup system_names()
{
    return {
        [](const std::string& name) -> std::optional<uint32_t> {
            const passwd* pw = getpwnam(name.c_str());
            return pw != nullptr ? std::optional<uint32_t>(pw->pw_uid) : std::nullopt;
        },
        [](const std::string& name) -> std::optional<uint32_t> {
            const group* gr = getgrnam(name.c_str());
            return gr != nullptr ? std::optional<uint32_t>(gr->gr_gid) : std::nullopt;
        },
    };
}

}  // namespace

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
    ConfigParse parsed = parse_config(*text, system_names());
    for (const std::string& e : parsed.errors)
        NVS_WARN("%s: %s; ignored", path.c_str(), e.c_str());
    return parsed.layer;
}

}  // namespace nvshare::daemon
