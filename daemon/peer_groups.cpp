#include "daemon/peer_groups.h"

#include <sys/socket.h>

#include <cerrno>

namespace nvshare::daemon {

std::vector<uint32_t> peer_groups(int fd, gid_t gid)
{
    std::vector<gid_t> groups(64);
    for (;;) {
        socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
            groups.resize(len / sizeof(gid_t));
            break;
        }
        // ERANGE: len is the size needed (up to NGROUPS_MAX, 65536 groups).
        if (errno != ERANGE || len <= groups.size() * sizeof(gid_t)) {
            groups.clear();
            break;
        }
        groups.resize(len / sizeof(gid_t));
    }
    std::vector<uint32_t> all{gid};
    all.insert(all.end(), groups.begin(), groups.end());
    return all;
}

}  // namespace nvshare::daemon
