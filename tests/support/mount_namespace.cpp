#include "tests/support/mount_namespace.h"

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nvshare::test {

std::string enter_private_mount_namespace()
{
    if (geteuid() != 0)
        return "needs root: for a private mount namespace";
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return std::string("no private mount namespace: ") + strerror(errno);
    return "";
}

}  // namespace nvshare::test
