#include "daemon/listener.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/codec.h"
#include "daemon/log.h"

namespace nvshare::daemon {

Listener::Listener(const Principals& principals, Handler handler)
    : principals_(principals), handler_(std::move(handler))
{
}

Listener::~Listener()
{
    sd_event_source_disable_unref(source_);
    sd_event_source_disable_unref(retry_source_);
    sd_event_source_disable_unref(rest_source_);
    if (fd_ >= 0)
        close(fd_);
    if (own_socket_)
        unlink(path_.c_str());
}

bool Listener::open(sd_event* event, const std::string& socket_path)
{
    event_ = event;
    path_ = socket_path;
    if (!open_socket())
        return false;
    const int r = sd_event_add_io(event_, &source_, fd_, EPOLLIN, on_ready, this);
    if (r < 0) {
        NVS_ERROR("cannot watch the socket: %s", strerror(-r));
        return false;
    }
    // New connections after the clients' messages of the same round; a
    // client that never stops sending would then starve them, so a
    // client's turn also takes a round of them once kAcceptAtLeastEvery has
    // passed without one (accept_if_due).
    sd_event_source_set_priority(source_, SD_EVENT_PRIORITY_NORMAL + 1);
    return true;
}

bool Listener::open_socket()
{
    const int n = sd_listen_fds(1);
    if (n > 1) {
        NVS_ERROR("expected one socket from systemd, got %d", n);
        return false;
    }
    if (n == 1) {
        fd_ = SD_LISTEN_FDS_START;
        if (sd_is_socket_unix(fd_, SOCK_STREAM, 1, nullptr, 0) <= 0) {
            NVS_ERROR("the socket passed by systemd is not a listening Unix stream socket");
            return false;
        }
        fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
        NVS_INFO("using the socket passed by systemd");
        return true;
    }

    const std::string& path = path_;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        NVS_ERROR("socket path too long: %s", path.c_str());
        return false;
    }
    memcpy(addr.sun_path, path.c_str(), path.size() + 1);

    // Create the directory (one level, like systemd's DirectoryMode=0755).
    const auto slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0) {
        const std::string dir = path.substr(0, slash);
        if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
            NVS_ERROR("cannot create %s: %s", dir.c_str(), strerror(errno));
            return false;
        }
    }
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        NVS_ERROR("socket: %s", strerror(errno));
        return false;
    }
    // A socket file left by a dead daemon is removed; a live one is not taken over.
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            NVS_ERROR("%s exists and is not a socket", path.c_str());
            return false;
        }
        const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const bool alive =
            probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        if (probe >= 0)
            close(probe);
        if (alive) {
            NVS_ERROR("another nvshared is already listening on %s", path.c_str());
            return false;
        }
        unlink(path.c_str());
    }
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
        NVS_ERROR("cannot bind %s: %s", path.c_str(), strerror(errno));
        return false;
    }
    own_socket_ = true;
    // Every local user may connect; the daemon decides what each may do.
    chmod(path.c_str(), 0666);
    if (listen(fd_, SOMAXCONN) < 0) {
        NVS_ERROR("listen: %s", strerror(errno));
        return false;
    }
    NVS_INFO("listening on %s", path.c_str());
    return true;
}

int Listener::on_ready(sd_event_source*, int, uint32_t, void* self)
{
    auto* l = static_cast<Listener*>(self);
    l->accept_round();
    l->handler_.after_round();
    return 0;
}

void Listener::accept_if_due()
{
    if (!paused_ && !resting_ && AcceptGate::round_due(last_round_, Clock::now()))
        accept_round();
}

void Listener::accept_round()
{
    // A round's worth (accept_gate.h): the listener stays readable while
    // more wait, and the loop takes them up in its next round, after the
    // clients' messages that came meanwhile (the listener's priority is
    // below theirs).
    const auto now = Clock::now();
    last_round_ = now;
    int accepted = 0, refused = 0;
    while (AcceptGate::round_goes_on(accepted, accepted - refused)) {
        const int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        ++accepted;
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            --accepted;
            if (errno == EMFILE || errno == ENFILE)
                pause_accepting();
            break;
        }
        ucred peer{};
        socklen_t len = sizeof peer;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0) {
            close(fd);
            continue;
        }
        const uint32_t principal = principals_.of(peer.uid);
        if (!gate_.admit(principal, now)) {
            ++refused;
            refuse_fast(fd, peer, principal, now);
            continue;
        }
        handler_.accepted(fd, peer, principal, now);
    }
    if (AcceptGate::pause_after(accepted, refused))
        rest_accepting();
}

void Listener::refuse_fast(int fd, const ucred& peer, uint32_t principal, TimePoint now)
{
    char text[160];
    const int n = snprintf(text, sizeof text,
                           "user %u opens connections faster than %.0f a second (bursts of %.0f)",
                           principal, kConnectionsPerSecond, kConnectionBurst);
    uint8_t frame[256];
    const size_t size = proto::encode(
        proto::ErrorReply{proto::ErrorCode::Refused, text,
                          static_cast<uint32_t>(std::clamp(n, 0, int{sizeof text} - 1))},
        frame, sizeof frame);
    if (size != 0)
        (void)::send(fd, frame, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    close(fd);
    uint64_t left_out = 0;
    if (gate_.log_refusal(principal, now, &left_out))
        NVS_WARN(
            "refused a connection of pid %d uid %u: %s (%llu more refused since the last "
            "line)",
            peer.pid, peer.uid, text, static_cast<unsigned long long>(left_out));
}

void Listener::descriptor_freed()
{
    resume_accepting();
}

// Out of descriptors: the pending connections stay in the backlog, and the
// level-triggered listener would wake the loop again at once, forever. Stop
// watching it until a connection closes, or a second has passed.
void Listener::pause_accepting()
{
    if (paused_)
        return;
    paused_ = true;
    NVS_WARN("out of file descriptors: new clients wait in the backlog until one is free");
    update_source();
    if (retry_source_ == nullptr)
        sd_event_add_time_relative(event_, &retry_source_, CLOCK_MONOTONIC, 1000000, 100000,
                                   on_retry, this);
    else
        sd_event_source_set_time_relative(retry_source_, 1000000);
    sd_event_source_set_enabled(retry_source_, SD_EVENT_ONESHOT);
}

void Listener::resume_accepting()
{
    if (!paused_)
        return;
    paused_ = false;
    update_source();
    sd_event_source_set_enabled(retry_source_, SD_EVENT_OFF);
}

void Listener::rest_accepting()
{
    if (resting_)
        return;
    const uint64_t usec = to_usec(kAcceptPause);
    if (rest_source_ == nullptr) {
        if (sd_event_add_time_relative(event_, &rest_source_, CLOCK_MONOTONIC, usec, 1, on_rest_end,
                                       this) < 0)
            return;
    } else {
        sd_event_source_set_time_relative(rest_source_, usec);
    }
    sd_event_source_set_enabled(rest_source_, SD_EVENT_ONESHOT);
    resting_ = true;
    update_source();
}

int Listener::on_rest_end(sd_event_source*, uint64_t, void* self)
{
    auto* l = static_cast<Listener*>(self);
    l->resting_ = false;
    l->update_source();
    return 0;
}

void Listener::update_source()
{
    sd_event_source_set_enabled(source_, paused_ || resting_ ? SD_EVENT_OFF : SD_EVENT_ON);
}

int Listener::on_retry(sd_event_source*, uint64_t, void* self)
{
    static_cast<Listener*>(self)->resume_accepting();
    return 0;
}

}  // namespace nvshare::daemon
