#include "daemon/memory_watch.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "daemon/log.h"

namespace nvshare::daemon {

struct MemoryWatch::Shared {
    std::mutex mutex;
    std::condition_variable wake;
    bool stop = false;                // under mutex
    std::set<std::string> uuids;      // under mutex
    std::set<int32_t> pids;           // under mutex
    std::optional<Readings> pending;  // under mutex: read, not yet delivered
    int ready_fd = -1;                // the loop's eventfd; closed by the last owner

    ~Shared()
    {
        if (ready_fd >= 0)
            close(ready_fd);
    }
};

void MemoryWatch::run(const std::shared_ptr<Shared>& shared, const Reader& reader,
                      const HostReader& host_reader, Duration interval)
{
    std::unique_lock<std::mutex> lock(shared->mutex);
    for (;;) {
        shared->wake.wait(
            lock, [&] { return shared->stop || !shared->uuids.empty() || !shared->pids.empty(); });
        if (shared->stop)
            return;
        const std::set<std::string> uuids = shared->uuids;
        const std::set<int32_t> pids = shared->pids;
        lock.unlock();
        Readings readings;
        for (const std::string& uuid : uuids)
            readings.gpus[uuid] = reader(uuid);
        for (const int32_t pid : pids)
            readings.host[pid] = host_reader(pid);
        lock.lock();
        if (shared->stop)
            return;
        shared->pending = std::move(readings);
        const uint64_t one = 1;
        (void)!write(shared->ready_fd, &one, sizeof one);  // fails only when already signalled
        if (shared->wake.wait_for(lock, interval, [&] { return shared->stop; }))
            return;
    }
}

MemoryWatch::MemoryWatch(Reader reader, HostReader host_reader, Duration interval)
    : reader_(std::move(reader)),
      host_reader_(std::move(host_reader)),
      interval_(interval),
      shared_(std::make_shared<Shared>())
{
}

MemoryWatch::~MemoryWatch()
{
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        shared_->stop = true;
    }
    shared_->wake.notify_all();
    sd_event_source_disable_unref(source_);
}

bool MemoryWatch::start(sd_event* event, std::function<void(const Readings&)> deliver)
{
    deliver_ = std::move(deliver);
    shared_->ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (shared_->ready_fd < 0) {
        NVS_ERROR("cannot make the memory watch's eventfd: %s", strerror(errno));
        return false;
    }
    const int r = sd_event_add_io(event, &source_, shared_->ready_fd, EPOLLIN, on_ready, this);
    if (r < 0) {
        NVS_ERROR("cannot watch the memory watch's eventfd: %s", strerror(-r));
        return false;
    }
    try {
        std::thread([shared = shared_, reader = reader_, host_reader = host_reader_,
                     interval = interval_] {
            run(shared, reader, host_reader, interval);
        }).detach();
    } catch (const std::system_error& e) {
        NVS_ERROR("cannot start the memory watch: %s", e.what());
        return false;
    }
    return true;
}

void MemoryWatch::watch(std::set<std::string> uuids, std::set<int32_t> pids)
{
    bool wake = false;
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        wake = shared_->uuids.empty() && shared_->pids.empty() && (!uuids.empty() || !pids.empty());
        shared_->uuids = std::move(uuids);
        shared_->pids = std::move(pids);
    }
    if (wake)
        shared_->wake.notify_all();
}

int MemoryWatch::on_ready(sd_event_source*, int fd, uint32_t, void* self)
{
    auto* w = static_cast<MemoryWatch*>(self);
    uint64_t count = 0;
    (void)!read(fd, &count, sizeof count);
    std::optional<Readings> readings;
    {
        std::lock_guard<std::mutex> lock(w->shared_->mutex);
        readings.swap(w->shared_->pending);
    }
    if (readings)
        w->deliver_(*readings);
    return 0;
}

}  // namespace nvshare::daemon
