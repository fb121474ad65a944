// Which container or service a client runs in, as its control group says:
// container processes reach nvshared through the bind-mounted socket with
// their host pid (SO_PEERCRED), so /proc/PID/cgroup names their container
// (libpod-ID, docker-ID.scope, a pod's cri-containerd-ID.scope) or, for a
// host process, its unit (session-3.scope, foo.service).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace nvshare::daemon {

// The last component of the process's cgroup path from the text of
// /proc/PID/cgroup: the unified hierarchy's ("0::/…") where there is one,
// else the name=systemd hierarchy's, else the first line's. Empty for the
// root cgroup or text without one.
std::string short_cgroup(std::string_view proc_cgroup_text);

// short_cgroup of /proc/PID/cgroup; empty when it cannot be read (the
// process is gone, or another pid namespace hides it).
std::string process_cgroup(pid_t pid);

}  // namespace nvshare::daemon
