// Raw frames, well-formed or deliberately not, for the bad-input tests.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/codec.h"
#include "common/lock_client.h"

namespace nvshare::test {

using Bytes = std::vector<uint8_t>;

inline Bytes header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length)
{
    const proto::FrameHeader h{magic, version, type, length, 0};
    Bytes b(sizeof h);
    std::memcpy(b.data(), &h, sizeof h);
    return b;
}

// A frame whose header announces `payload.size()` bytes of type `type`.
inline Bytes frame(uint16_t type, const Bytes& payload = {})
{
    // The daemon's own encoder: one buffer, header then payload.
    Bytes b(sizeof(proto::FrameHeader) + payload.size());
    proto::encode(static_cast<proto::MsgType>(type), payload.data(),
                  static_cast<uint32_t>(payload.size()), b.data(), b.size());
    return b;
}

inline Bytes frame(proto::MsgType type, const Bytes& payload = {})
{
    return frame(static_cast<uint16_t>(type), payload);
}

template <typename T>
Bytes bytes_of(const T& value)
{
    Bytes b(sizeof value);
    std::memcpy(b.data(), &value, sizeof value);
    return b;
}

inline Bytes operator+(Bytes a, const Bytes& b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// A Hello payload naming `gpus`, whose count field says `claimed_count`.
inline Bytes hello_payload(const std::vector<GpuSpec>& gpus, uint32_t claimed_count,
                           const char* comm = "rawclient")
{
    proto::HelloFixed fixed{};
    fixed.gpu_count = claimed_count;
    std::memcpy(fixed.comm, comm, std::min(std::strlen(comm), sizeof fixed.comm));
    Bytes b = bytes_of(fixed);
    for (const auto& g : gpus) {
        proto::HelloGpu rec{};
        std::memcpy(rec.uuid, g.uuid, sizeof rec.uuid);
        rec.physical_memory = g.physical_memory;
        b = b + bytes_of(rec);
    }
    return b;
}

inline Bytes hello_payload(const std::vector<GpuSpec>& gpus)
{
    return hello_payload(gpus, static_cast<uint32_t>(gpus.size()));
}

inline Bytes mask_payload(uint64_t mask)
{
    return bytes_of(proto::GpuMaskPayload{mask});
}

}  // namespace nvshare::test
