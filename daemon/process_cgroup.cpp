#include "daemon/process_cgroup.h"

#include <fstream>
#include <sstream>

namespace nvshare::daemon {

namespace {

// "ID:CONTROLLERS:PATH" -> PATH without trailing slashes ("" for "/").
std::string_view line_path(std::string_view line)
{
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos)
        return {};
    std::string_view path = line.substr(second + 1);
    while (!path.empty() && path.back() == '/')
        path.remove_suffix(1);
    return path;
}

}  // namespace

std::string cgroup_path(std::string_view text)
{
    std::string_view unified, systemd, other;
    while (!text.empty()) {
        const size_t eol = text.find('\n');
        const std::string_view line = text.substr(0, eol);
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
        if (line.empty())
            continue;
        if (other.empty() && !cgroup_name(line_path(line)).empty())
            other = line;
        if (line.rfind("0::", 0) == 0)
            unified = line;
        else if (line.find(":name=systemd:") != std::string_view::npos)
            systemd = line;
    }
    // On a hybrid host the unified hierarchy may sit at the root for all, and
    // a container runtime may place it in one v1 controller's group only.
    for (const std::string_view line : {unified, systemd, other})
        if (const std::string_view path = line_path(line); !cgroup_name(path).empty())
            return std::string(path);
    return {};
}

std::string_view cgroup_name(std::string_view path)
{
    const size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string short_cgroup(std::string_view text)
{
    return std::string(cgroup_name(cgroup_path(text)));
}

std::string process_cgroup_path(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
    if (!in)
        return {};
    std::ostringstream text;
    text << in.rdbuf();
    return cgroup_path(text.str());
}

}  // namespace nvshare::daemon
