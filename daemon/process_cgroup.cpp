#include "daemon/process_cgroup.h"

#include <dirent.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <vector>

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

std::string_view root_owned_prefix(std::string_view path, const CgroupOwner& owner_of)
{
    size_t end = 0;  // of the trusted prefix
    while (end < path.size()) {
        const size_t next = path.find('/', end + 1);
        const size_t stop = next == std::string_view::npos ? path.size() : next;
        const std::optional<uid_t> owner = owner_of(path.substr(0, stop));
        if (!owner || *owner != 0)
            break;
        end = stop;
    }
    return path.substr(0, end);
}

std::string root_owned_cgroup(std::string_view path)
{
    if (path.empty())
        return {};
    // The hierarchy the path came from (cgroup_path): the unified one, the
    // name=systemd one, else a v1 controller's, each mounted below
    // /sys/fs/cgroup (or, on a unified host, that mount itself).
    std::vector<std::string> mounts = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup",
                                       "/sys/fs/cgroup/systemd"};
    if (DIR* d = opendir("/sys/fs/cgroup"); d != nullptr) {
        while (const dirent* e = readdir(d))
            if (e->d_name[0] != '.')
                mounts.push_back(std::string("/sys/fs/cgroup/") + e->d_name);
        closedir(d);
    }
    for (const std::string& mount : mounts) {
        struct stat st {};
        const std::string whole = mount + std::string(path);
        if (stat(whole.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        return std::string(root_owned_prefix(path, [&](std::string_view part) {
            struct stat s {};
            const std::string dir = mount + std::string(part);
            return stat(dir.c_str(), &s) == 0 ? std::optional<uid_t>(s.st_uid) : std::nullopt;
        }));
    }
    return {};
}

}  // namespace nvshare::daemon
