#include "preload/lock/connection.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "preload/env.h"
#include "preload/log.h"

namespace nvshare::preload {

namespace {

// The open socket, for the fork handler.
std::atomic<int> g_socket_fd{-1};

}  // namespace

bool Connection::connect()
{
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    static_assert(sizeof addr.sun_path == sizeof config().socket_path);
    memcpy(addr.sun_path, config().socket_path, sizeof addr.sun_path);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
        log_debug("cannot connect to %s: %s", addr.sun_path, strerror(errno));
        ::close(fd);
        return false;
    }
    in_len_ = 0;
    fd_ = fd;
    g_socket_fd.store(fd);
    return true;
}

bool Connection::hello(const proto::Hello& hello)
{
    uint8_t frame[proto::frame_size(sizeof(proto::HelloFixed) +
                                    proto::kMaxGpusPerClient * sizeof(proto::HelloGpu))];
    if (!send_bytes(frame, proto::encode(hello, frame, sizeof frame))) {
        close();
        return false;
    }
    log_debug("registered with %s: %u GPU(s)", config().socket_path, hello.gpu_count);
    return true;
}

void Connection::close()
{
    if (fd_ >= 0) {
        g_socket_fd.store(-1);
        ::close(fd_);
    }
    fd_ = -1;
}

bool Connection::send_bytes(const uint8_t* frame, size_t size)
{
    size_t sent = 0;
    while (size != 0 && sent < size) {
        const ssize_t w = ::send(fd_, frame + sent, size - sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        sent += static_cast<size_t>(w);
    }
    return size != 0;
}

bool Connection::read_frames(Handler handle, void* ctx)
{
    ssize_t n;
    do
        n = ::read(fd_, in_ + in_len_, sizeof in_ - in_len_);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return false;
    in_len_ += static_cast<size_t>(n);
    size_t off = 0;
    for (;;) {
        proto::FrameHeader h{};
        const auto st = proto::decode_header(in_ + off, in_len_ - off, sizeof in_ - sizeof h, &h);
        if (st == proto::DecodeStatus::NeedMore)
            break;
        if (st != proto::DecodeStatus::Ok)
            return false;
        if (!proto::frame_complete(h, in_len_ - off))
            break;
        if (!handle(ctx, static_cast<proto::MsgType>(h.type), in_ + off + sizeof h, h.length))
            return false;
        off += sizeof h + h.length;
    }
    memmove(in_, in_ + off, in_len_ - off);
    in_len_ -= off;
    return true;
}

void Connection::close_after_fork()
{
    const int sock = g_socket_fd.exchange(-1);
    if (sock >= 0)
        ::close(sock);
}

}  // namespace nvshare::preload
