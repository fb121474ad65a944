#include "daemon/config_file.h"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>

#include <algorithm>

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

// One file's settings; an empty layer if it does not exist and may be
// missing; nullopt (logged) if it cannot be read.
std::optional<SettingsLayer> load_one(const std::string& path, bool required)
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

}  // namespace

std::vector<std::string> config_drop_ins(const std::string& path)
{
    std::vector<std::string> names;
    DIR* dir = opendir((path + ".d").c_str());
    if (dir == nullptr)
        return names;
    while (const dirent* e = readdir(dir)) {
        const std::string name = e->d_name;
        if (name.size() > 5 && name[0] != '.' && name.ends_with(".conf"))
            names.push_back(path + ".d/" + name);
    }
    closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
}

std::optional<SettingsLayer> load_config_file(const std::string& path, bool required)
{
    auto layer = load_one(path, required);
    if (!layer)
        return std::nullopt;
    for (const std::string& drop_in : config_drop_ins(path)) {
        const auto top = load_one(drop_in, true);
        if (!top)
            return std::nullopt;
        merge_layer(*layer, *top);
    }
    return layer;
}

}  // namespace nvshare::daemon
