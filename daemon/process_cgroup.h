// Which container or service a client runs in, as its control group says:
// container processes reach nvshared through the bind-mounted socket with
// their host pid (SO_PEERCRED), so /proc/PID/cgroup names their container
// (libpod-ID, docker-ID.scope, a pod's cri-containerd-ID.scope) or, for a
// host process, its unit (session-3.scope, foo.service). The whole path is
// what the admin's unit priority rules match (priority_rules.h).
#pragma once

#include <sys/types.h>

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

}  // namespace nvshare::daemon
