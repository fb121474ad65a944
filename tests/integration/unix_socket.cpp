#include "tests/integration/unix_socket.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace nvshare::test {

int listen_unix(const std::string& path)
{
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 ||
        listen(fd, SOMAXCONN) < 0)
        throw std::runtime_error("cannot listen on " + path);
    chmod(path.c_str(), 0666);
    return fd;
}

bool wait_drained(int fd, Millis timeout)
{
    // On a Unix stream socket SIOCOUTQ counts what the peer has not read yet.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int queued = 0;
        if (ioctl(fd, SIOCOUTQ, &queued) < 0)
            return false;
        if (queued == 0)
            return true;
        if (std::chrono::steady_clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(100us);
    }
}

}  // namespace nvshare::test
