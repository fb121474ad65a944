// Which container or service a client runs in, as its control group says:
// container processes reach nvshared through the bind-mounted socket with
// their host pid (SO_PEERCRED), so /proc/PID/cgroup names their container
// (libpod-ID, docker-ID.scope, a pod's cri-containerd-ID.scope) or, for a
// host process, its unit (session-3.scope, foo.service). The whole path is
// what the admin's unit priority rules match (priority_rules.h).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace nvshare::daemon {

// The process's cgroup path from the text of /proc/PID/cgroup: the unified
// hierarchy's ("0::/…") where it is not the root, else the name=systemd
// hierarchy's, else the first line's that is not the root; without trailing
// slashes. Empty for the root cgroup or text without one.
std::string cgroup_path(std::string_view proc_cgroup_text);

// A path's last component: "/system.slice/foo.service" -> "foo.service".
std::string_view cgroup_name(std::string_view path);

// cgroup_name(cgroup_path(text)).
std::string short_cgroup(std::string_view proc_cgroup_text);

// cgroup_path of /proc/PID/cgroup; empty when it cannot be read (the
// process is gone, or another pid namespace hides it).
std::string process_cgroup_path(pid_t pid);

// Who owns a cgroup directory, by its path below the hierarchy's root
// ("/system.slice"); nullopt where unknown.
using CgroupOwner = std::function<std::optional<uid_t>(std::string_view path)>;

// The leading part of `path` that no unprivileged user can have made: its
// components up to the first whose directory is not root's (a delegated
// subtree, user@UID.service and below or a container's own, belongs to its
// user, who may name cgroups there as they please). What unit priority
// rules match (nvshare.conf(5)): a user's own "jupyter.service" below
// user@UID.service is not the admin's jupyter.service.
std::string_view root_owned_prefix(std::string_view path, const CgroupOwner& owner_of);

// root_owned_prefix with owners read from the cgroup file system: the
// hierarchy mounted at /sys/fs/cgroup/unified, /sys/fs/cgroup or
// /sys/fs/cgroup/systemd that has the path (empty where none has it).
std::string root_owned_cgroup(std::string_view path);

}  // namespace nvshare::daemon
