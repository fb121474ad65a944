// The groups of the process at the other end of a Unix socket, for the
// admin's group priority rules: the credentials the kernel recorded when it
// connected (SO_PEERCRED's gid, SO_PEERGROUPS), like its uid, so that they
// are what the process was, not what /proc says of a pid later.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace nvshare::daemon {

// `gid` (SO_PEERCRED's) and the supplementary groups of the peer of `fd`;
// only `gid` when the kernel does not say (Linux before 4.13).
std::vector<uint32_t> peer_groups(int fd, gid_t gid);

}  // namespace nvshare::daemon
