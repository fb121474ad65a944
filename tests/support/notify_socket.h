// The daemon's sd_notify() channel, as systemd would read it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/wait.h"

namespace nvshare::test {

// Collects the assignments ("READY=1", "STATUS=...") sent to a datagram
// socket at `path`. Like systemd it reads all the time (on a thread of its
// own): sd_notify() blocks the daemon once a few datagrams wait unread.
class NotifySocket {
public:
    explicit NotifySocket(std::string path);
    ~NotifySocket();
    NotifySocket(const NotifySocket&) = delete;
    NotifySocket& operator=(const NotifySocket&) = delete;
    const std::string& path() const { return path_; }
    // The next assignment, after the last one returned, that starts with
    // `prefix`; those passed over on the way stay in seen().
    std::optional<std::string> wait_for(const std::string& prefix, Millis timeout = kTimeout);
    std::vector<std::string> seen() const;
    // From now on nothing is read: the socket's queue fills, as with a
    // manager that is stuck.
    void stop_reading();

private:
    void read_loop();
    std::string path_;
    int fd_ = -1;
    int stop_[2] = {-1, -1};
    mutable std::mutex mutex_;
    std::condition_variable arrived_;
    std::vector<std::string> seen_;
    size_t consumed_ = 0;  // seen_[0..consumed_) were returned or passed over
    std::atomic<bool> reading_{true};
    std::thread reader_;
};

}  // namespace nvshare::test
