#include "daemon/notify.h"

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace nvshare::daemon {

Notifier::Notifier()
{
    const char* path = getenv("NOTIFY_SOCKET");
    if (path == nullptr || path[0] == '\0')
        return;
    const size_t length = strlen(path);
    // An absolute path, or '@' for the abstract namespace (as systemd passes it).
    if ((path[0] != '/' && path[0] != '@') || length >= sizeof addr_.sun_path)
        return;
    addr_.sun_family = AF_UNIX;
    memcpy(addr_.sun_path, path, length);
    if (path[0] == '@')
        addr_.sun_path[0] = '\0';
    addr_len_ =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length + (path[0] == '@' ? 0 : 1));
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

Notifier::~Notifier()
{
    if (fd_ >= 0)
        close(fd_);
}

bool Notifier::send(std::string_view assignments)
{
    if (fd_ < 0)
        return false;
    const ssize_t n =
        sendto(fd_, assignments.data(), assignments.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(&addr_), addr_len_);
    return n == static_cast<ssize_t>(assignments.size());
}

}  // namespace nvshare::daemon
