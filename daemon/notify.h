// systemd's notification socket ($NOTIFY_SOCKET), written without ever
// blocking the event loop: sd_notify() waits once the receiver's queue is
// full (a manager that stopped reading, a test's socket), which would stop
// the lock for everybody. A message that does not fit now is reported, not
// waited for.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string_view>

namespace nvshare::daemon {

class Notifier {
public:
    Notifier();  // reads $NOTIFY_SOCKET; does nothing without one
    ~Notifier();
    Notifier(const Notifier&) = delete;
    Notifier& operator=(const Notifier&) = delete;

    bool enabled() const { return fd_ >= 0; }
    // Sends newline-separated assignments ("READY=1"); false if there is no
    // socket or the message could not be queued at once.
    bool send(std::string_view assignments);

private:
    int fd_ = -1;
    sockaddr_un addr_{};
    socklen_t addr_len_ = 0;
};

}  // namespace nvshare::daemon
