#include "cli/cdi_spec.h"

#include <cctype>

namespace nvshare::cli::cdi {

namespace {

// CDI's device name rule: letters, digits, '_', '.', ':', '-'; a letter or
// digit first.
bool valid_device_name(const std::string& name)
{
    if (name.empty() || !isalnum(static_cast<unsigned char>(name[0])))
        return false;
    for (const char c : name)
        if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ':' && c != '-')
            return false;
    return true;
}

nlohmann::json read_only_bind(const std::string& host, const std::string& container)
{
    return {{"hostPath", host},
            {"containerPath", container},
            {"options", {"ro", "nosuid", "nodev", "bind"}}};
}

}  // namespace

std::string path_problem(const std::string& path, bool preload_entry)
{
    if (path.empty() || path[0] != '/')
        return "'" + path + "' is not an absolute path";
    for (const char c : path) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f)
            return "the path contains a control character (a newline, a tab, ...)";
        if (preload_entry && (c == ' ' || c == ':'))
            return "'" + path +
                   "' cannot be one entry of /etc/ld.so.preload, which splits at spaces and ':'";
    }
    return {};
}

nlohmann::json make_spec(const std::vector<Gpu>& gpus, const Paths& paths)
{
    // Every device carries all the edits (CDI refuses a device without any);
    // runtimes apply a mount requested twice once.
    const nlohmann::json edits = {{"mounts",
                                   {read_only_bind(paths.socket_dir, paths.container_socket_dir),
                                    read_only_bind(paths.library, paths.library),
                                    read_only_bind(paths.preload_file, "/etc/ld.so.preload")}}};
    nlohmann::json devices = nlohmann::json::array();
    devices.push_back({{"name", "all"}, {"containerEdits", edits}});
    for (const Gpu& g : gpus)
        devices.push_back({{"name", std::to_string(g.index)}, {"containerEdits", edits}});
    for (const Gpu& g : gpus)
        devices.push_back({{"name", g.uuid}, {"containerEdits", edits}});
    return {{"cdiVersion", kVersion}, {"kind", kKind}, {"devices", devices}};
}

std::string preload_file_text(const std::string& library)
{
    return library + "\n";
}

std::vector<Gpu> gpus_from_status(const nlohmann::json& status)
{
    std::vector<Gpu> out;
    if (!status.contains("gpus") || !status["gpus"].is_array())
        return out;
    for (const auto& g : status["gpus"]) {
        if (!g.contains("index") || !g["index"].is_number_unsigned() || !g.contains("uuid") ||
            !g["uuid"].is_string())
            continue;
        Gpu gpu{g["index"].get<uint64_t>(), g["uuid"].get<std::string>()};
        if (valid_device_name(gpu.uuid))
            out.push_back(std::move(gpu));
    }
    return out;
}

std::vector<std::string> device_names(const nlohmann::json& spec, std::string* error)
{
    std::vector<std::string> out;
    if (!spec.is_object() || !spec.contains("kind") || !spec["kind"].is_string() ||
        !spec.contains("devices") || !spec["devices"].is_array()) {
        *error = "not a CDI spec (no kind or devices)";
        return out;
    }
    const std::string kind = spec["kind"].get<std::string>();
    for (const auto& d : spec["devices"]) {
        if (!d.is_object() || !d.contains("name") || !d["name"].is_string()) {
            *error = "a device without a name";
            return {};
        }
        out.push_back(kind + "=" + d["name"].get<std::string>());
    }
    return out;
}

}  // namespace nvshare::cli::cdi
