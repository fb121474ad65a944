#include "metrics/status_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/lock_client.h"
#include "common/write_all.h"

namespace nvshare::metrics {

namespace {

// Holds `path`'s lock (flock) until destruction, if it got it in time.
class FileLock {
public:
    explicit FileLock(const std::string& path)
        : fd_(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600))
    {
        if (fd_ < 0)
            return;
        const auto deadline = std::chrono::steady_clock::now() + kLockWait;
        while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            if ((errno != EWOULDBLOCK && errno != EINTR) ||
                std::chrono::steady_clock::now() >= deadline) {
                close(fd_);
                fd_ = -1;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    ~FileLock()
    {
        if (fd_ >= 0)
            close(fd_);  // lets go of the lock
    }
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    bool held() const { return fd_ >= 0; }

private:
    int fd_;
};

// status.json's text if it was written at most kStatusFresh ago.
std::string fresh_copy(const std::string& path)
{
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return {};
    std::string text;
    struct stat st {};
    timespec now{};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && clock_gettime(CLOCK_REALTIME, &now) == 0) {
        const auto age = std::chrono::seconds(now.tv_sec - st.st_mtim.tv_sec) +
                         std::chrono::nanoseconds(now.tv_nsec - st.st_mtim.tv_nsec);
        if (age >= std::chrono::nanoseconds::zero() && age < kStatusFresh) {
            char buf[65536];
            ssize_t n;
            while ((n = read(fd, buf, sizeof buf)) > 0)
                text.append(buf, static_cast<size_t>(n));
            if (n < 0)
                text.clear();
        }
    }
    close(fd);
    return text;
}

// Leaves `text` in `path` (whole or not at all).
void keep(const std::string& path, const std::string& text)
{
    const std::string temp = path + ".new";
    const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = fd >= 0 && write_all(fd, text);
    if (fd >= 0)
        ok = close(fd) == 0 && ok;
    if (!ok || rename(temp.c_str(), path.c_str()) != 0) {
        fprintf(stderr, "nvshare-metrics: cannot keep the status in %s (%s)\n", path.c_str(),
                strerror(errno));
        unlink(temp.c_str());
    }
}

}  // namespace

std::string shared_status(const std::string& dir, const std::string& socket, std::string* error)
{
    if (dir.empty())
        return LockClient::query_status(socket, error);
    const FileLock lock(dir + "/status.lock");
    if (!lock.held()) {
        fprintf(stderr, "nvshare-metrics: cannot lock %s/status.lock (%s); asking nvshared\n",
                dir.c_str(), strerror(errno));
        return LockClient::query_status(socket, error);
    }
    const std::string path = dir + "/status.json";
    if (std::string text = fresh_copy(path); !text.empty())
        return text;
    std::string text = LockClient::query_status(socket, error);
    if (text.empty())
        return text;
    keep(path, text);
    return text;
}

}  // namespace nvshare::metrics
