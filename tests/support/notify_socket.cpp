#include "tests/support/notify_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace nvshare::test {

NotifySocket::NotifySocket(std::string path) : path_(std::move(path))
{
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    // A daemon started again in the same directory gets a new one.
    unlink(path_.c_str());
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 ||
        pipe2(stop_, O_CLOEXEC) < 0)
        throw std::runtime_error("cannot bind the notify socket " + path_);
    reader_ = std::thread([this] { read_loop(); });
}

NotifySocket::~NotifySocket()
{
    close(stop_[1]);
    reader_.join();
    close(stop_[0]);
    close(fd_);
}

void NotifySocket::read_loop()
{
    for (;;) {
        pollfd p[2] = {{fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return;
        if (p[1].revents != 0)
            return;
        if (p[0].revents == 0)
            continue;
        if (!reading_) {
            // Wait for the stop pipe alone: the datagrams stay queued.
            pollfd stop{stop_[0], POLLIN, 0};
            poll(&stop, 1, -1);
            return;
        }
        char buf[4096];
        const ssize_t n = recv(fd_, buf, sizeof buf, 0);
        if (n <= 0)
            continue;
        // One datagram may carry several newline-separated assignments.
        std::istringstream lines(std::string(buf, static_cast<size_t>(n)));
        std::lock_guard lock(mutex_);
        for (std::string line; std::getline(lines, line);)
            if (!line.empty())
                seen_.push_back(line);
        arrived_.notify_all();
    }
}

std::optional<std::string> NotifySocket::wait_for(const std::string& prefix, Millis timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(mutex_);
    for (;;) {
        for (; consumed_ < seen_.size(); ++consumed_)
            if (seen_[consumed_].rfind(prefix, 0) == 0)
                return seen_[consumed_++];
        if (arrived_.wait_until(lock, deadline) == std::cv_status::timeout &&
            consumed_ == seen_.size())
            return std::nullopt;
    }
}

void NotifySocket::stop_reading()
{
    reading_ = false;
}

std::vector<std::string> NotifySocket::seen() const
{
    std::lock_guard lock(mutex_);
    return seen_;
}

}  // namespace nvshare::test
