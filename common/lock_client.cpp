#include "common/lock_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace nvshare {

std::string Frame::text(size_t offset) const
{
    if (offset >= payload.size())
        return {};
    return std::string(reinterpret_cast<const char*>(payload.data()) + offset,
                       payload.size() - offset);
}

LockClient::~LockClient()
{
    close();
}

LockClient::LockClient(LockClient&& other) noexcept
    : fd_(other.fd_), eof_(other.eof_), buffer_(std::move(other.buffer_))
{
    other.fd_ = -1;
}

LockClient& LockClient::operator=(LockClient&& other) noexcept
{
    if (this != &other) {
        close();
        fd_ = other.fd_;
        eof_ = other.eof_;
        buffer_ = std::move(other.buffer_);
        other.fd_ = -1;
    }
    return *this;
}

void LockClient::close()
{
    if (fd_ >= 0)
        ::close(fd_);
    fd_ = -1;
    buffer_.clear();
}

bool LockClient::connect(const std::string& path, std::string* error)
{
    close();
    eof_ = false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        *error = "socket path too long";
        return false;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
        *error = std::string("cannot connect to ") + path + ": " + std::strerror(errno);
        close();
        return false;
    }
    return true;
}

bool LockClient::send_raw(const void* bytes, size_t length)
{
    const auto* p = static_cast<const uint8_t*>(bytes);
    while (length > 0) {
        const ssize_t n = ::send(fd_, p, length, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        length -= static_cast<size_t>(n);
    }
    return true;
}

bool LockClient::send(proto::MsgType type, const void* payload, uint32_t length)
{
    std::vector<uint8_t> frame(proto::frame_size(length));
    proto::encode(type, payload, length, frame.data(), frame.size());
    return send_raw(frame.data(), frame.size());
}

bool LockClient::hello(const std::string& comm, const std::vector<GpuSpec>& gpus,
                       proto::Priority priority)
{
    if (gpus.size() > proto::kMaxGpusPerClient)
        return false;
    proto::Hello m{};
    m.priority = priority;
    std::memcpy(m.comm, comm.data(), std::min(comm.size(), sizeof m.comm));  // NUL-padded, may fill
    m.gpu_count = static_cast<uint32_t>(gpus.size());
    for (size_t i = 0; i < gpus.size(); ++i) {
        proto::HelloGpu& g = m.gpus[i];
        std::memcpy(g.uuid, gpus[i].uuid, sizeof g.uuid);
        g.physical_memory = gpus[i].physical_memory;
        std::memcpy(g.name, gpus[i].name.data(), std::min(gpus[i].name.size(), sizeof g.name));
    }
    std::vector<uint8_t> frame(proto::frame_size(proto::payload_size(m)));
    return proto::encode(m, frame.data(), frame.size()) != 0 &&
           send_raw(frame.data(), frame.size());
}

bool LockClient::send_mask(proto::MsgType type, uint64_t gpus)
{
    const proto::GpuMaskPayload p{gpus};
    return send(type, &p, sizeof p);
}

bool LockClient::report_memory(uint32_t gpu, uint64_t managed, uint64_t pinned)
{
    const proto::MemoryPayload p{gpu, 0, managed, pinned};
    return send(proto::MsgType::Memory, &p, sizeof p);
}

std::optional<Frame> LockClient::receive(std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        proto::FrameHeader h{};
        const auto st =
            proto::decode_header(buffer_.data(), buffer_.size(), proto::kMaxStatusPayload, &h);
        if (st == proto::DecodeStatus::Ok && proto::frame_complete(h, buffer_.size())) {
            Frame f;
            f.type = static_cast<proto::MsgType>(h.type);
            f.payload.assign(buffer_.begin() + sizeof h, buffer_.begin() + sizeof h + h.length);
            buffer_.erase(buffer_.begin(), buffer_.begin() + sizeof h + h.length);
            return f;
        }
        if (st != proto::DecodeStatus::Ok && st != proto::DecodeStatus::NeedMore)
            return std::nullopt;
        if (fd_ < 0)
            return std::nullopt;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd pfd{fd_, POLLIN, 0};
        const int r = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return std::nullopt;
        uint8_t buf[65536];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            eof_ = true;
            return std::nullopt;
        }
        buffer_.insert(buffer_.end(), buf, buf + n);
    }
}

std::optional<Frame> LockClient::expect(proto::MsgType type, std::chrono::milliseconds timeout,
                                        std::atomic<uint64_t>* received)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() < 0)
            return std::nullopt;
        auto f = receive(left);
        if (f && received != nullptr)
            ++*received;
        if (!f || f->type == type)
            return f;
    }
}

std::string LockClient::query_status(const std::string& path, std::string* error)
{
    LockClient c;
    if (!c.connect(path, error))
        return {};
    if (!c.send(proto::MsgType::StatusQuery, nullptr, 0)) {
        *error = "cannot send to the daemon";
        return {};
    }
    auto f = c.expect(proto::MsgType::Status, std::chrono::seconds(5));
    if (!f) {
        *error = "no status from the daemon";
        return {};
    }
    return f->text();
}

}  // namespace nvshare
