#include "daemon/connection.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "daemon/log.h"
#include "daemon/process_exit.h"

namespace nvshare::daemon {

// steady_clock is CLOCK_MONOTONIC on Linux, the clock sd-event timers use.
static_assert(Clock::is_steady);

Connection::Connection(Server* owner, uint64_t serial_number, int socket, const ucred& peer_cred,
                       uint32_t charged_to, std::vector<uint64_t>& doomed)
    : server(owner),
      serial(serial_number),
      fd(socket),
      peer(peer_cred),
      principal(charged_to),
      doomed_(&doomed)
{
}

Connection::~Connection()
{
    sd_event_source_disable_unref(source);
    sd_event_source_disable_unref(timer);
    sd_event_source_disable_unref(exit_watch);
    if (fd >= 0)
        close(fd);
    if (exit_fd >= 0)
        close(exit_fd);
}

bool Connection::watch(sd_event* event, sd_event_io_handler_t on_io,
                       sd_event_time_handler_t on_timer)
{
    return sd_event_add_io(event, &source, fd, EPOLLIN, on_io, this) >= 0 &&
           sd_event_add_time(event, &timer, CLOCK_MONOTONIC, UINT64_MAX, 10000, on_timer, this) >=
               0;
}

bool Connection::read()
{
    uint8_t buf[8192];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            if (!closing)
                in.insert(in.end(), buf, buf + n);
            return true;
        }
        if (n == 0) {
            mark_dead();  // peer closed: a holder releases at once
            return false;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            mark_dead();
        return false;
    }
}

uint8_t* Connection::frame_room(size_t size)
{
    if (dead)
        return nullptr;
    // A client that left this much unread is not reading: one large frame
    // (a status of many clients) is not held against it.
    if (unread() > kMaxOutBuffer) {
        NVS_WARN("client %llu (pid %d) does not read its messages; disconnecting",
                 static_cast<unsigned long long>(serial), peer.pid);
        mark_dead();
        return nullptr;
    }
    const size_t old = out.size();
    out.resize(old + size);
    return out.data() + old;
}

void Connection::flush()
{
    const size_t pending_before = unread();
    const size_t sent_before = out_sent;
    while (out_sent < out.size()) {
        const ssize_t n = ::send(fd, out.data() + out_sent, out.size() - out_sent, MSG_NOSIGNAL);
        if (n > 0) {
            out_sent += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            // The peer's buffer is full: the unread clock starts, or starts
            // again where it read some.
            if (pending_before == 0 || out_sent != sent_before) {
                read_progress = Clock::now();
                arm_timer();
            }
            update_io_events();
            return;
        }
        mark_dead();
        return;
    }
    out.clear();
    out_sent = 0;
    update_io_events();
    if (closing)
        mark_dead();
}

void Connection::close_socket()
{
    sd_event_source_disable_unref(source);
    source = nullptr;
    close(fd);
    fd = -1;
}

void Connection::update_io_events()
{
    const uint32_t events =
        (paused ? 0u : uint32_t{EPOLLIN}) | (out_sent < out.size() ? uint32_t{EPOLLOUT} : 0u);
    sd_event_source_set_io_events(source, events);
}

std::optional<TimePoint> Connection::next_deadline() const
{
    std::optional<TimePoint> at;
    if (exit_fd >= 0)
        at = closed_at + kExitWaitMax;
    else if (!registered)
        at = hello_deadline;
    if (paused)
        at = at ? std::min(*at, resume_at) : resume_at;
    if (out_sent < out.size()) {
        const TimePoint unread_until = read_progress + kUnreadLimit;
        at = at ? std::min(*at, unread_until) : unread_until;
    }
    return at;
}

void Connection::arm_timer()
{
    const std::optional<TimePoint> at = next_deadline();
    if (!at) {
        sd_event_source_set_enabled(timer, SD_EVENT_OFF);
        return;
    }
    sd_event_source_set_time(timer, to_usec(at->time_since_epoch()));
    sd_event_source_set_enabled(timer, SD_EVENT_ONESHOT);
}

void Connection::mark_dead()
{
    if (!dead) {
        dead = true;
        doomed_->push_back(serial);
    }
}

}  // namespace nvshare::daemon
