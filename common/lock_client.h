// A blocking client of the lock socket, for nvsharectl, the tests and the
// benchmarks. (libnvshare.so has its own, libc-only client.)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/codec.h"

namespace nvshare {

struct Frame {
    proto::MsgType type{};
    std::vector<uint8_t> payload;

    template <typename T>
    T as() const
    {
        T value{};
        std::memcpy(&value, payload.data(), std::min(sizeof value, payload.size()));
        return value;
    }
    std::string text(size_t offset = 0) const;  // payload from offset as a string
};

struct GpuSpec {
    uint8_t uuid[proto::kUuidBytes]{};
    uint64_t physical_memory = 0;
    std::string name;
};

class LockClient {
public:
    LockClient() = default;
    ~LockClient();
    LockClient(LockClient&& other) noexcept;
    LockClient& operator=(LockClient&& other) noexcept;
    LockClient(const LockClient&) = delete;
    LockClient& operator=(const LockClient&) = delete;

    // Connects to the socket; on failure returns false and sets *error.
    bool connect(const std::string& path, std::string* error);
    bool connected() const { return fd_ >= 0; }
    int fd() const { return fd_; }
    void close();

    bool send(proto::MsgType type, const void* payload, uint32_t length);
    bool send_raw(const void* bytes, size_t length);
    // `priority`: the class the client asks for (Unset: none).
    bool hello(const std::string& comm, const std::vector<GpuSpec>& gpus,
               proto::Priority priority = proto::Priority::Unset);
    bool request(uint64_t gpus) { return send_mask(proto::MsgType::Request, gpus); }
    bool release(uint64_t gpus) { return send_mask(proto::MsgType::Released, gpus); }
    bool report_memory(uint32_t gpu, uint64_t managed, uint64_t pinned = 0);

    // Next frame within the timeout; nullopt on timeout, EOF or garbage
    // (eof() tells which).
    std::optional<Frame> receive(std::chrono::milliseconds timeout);
    // Skips frames until one of `type` arrives (or nullopt). `received`, if
    // given, counts every frame received on the way, that one included.
    std::optional<Frame> expect(proto::MsgType type, std::chrono::milliseconds timeout,
                                std::atomic<uint64_t>* received = nullptr);
    bool eof() const { return eof_; }

    // Connect, ask for the status JSON, return it (empty + *error on failure).
    static std::string query_status(const std::string& path, std::string* error);

private:
    bool send_mask(proto::MsgType type, uint64_t gpus);
    int fd_ = -1;
    bool eof_ = false;
    std::vector<uint8_t> buffer_;
};

}  // namespace nvshare
