// The one codec of the wire protocol (common/protocol.h): frames cut from a
// byte stream, and every message encoded from and decoded into a typed value.
// nvshared, libnvshare.so, nvsharectl and the tests read and write frames
// only through it. Like protocol.h it is libc-only: no allocation, no
// exceptions (the preload library links nothing but libc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/protocol.h"

namespace nvshare::proto {

// ---- frames -------------------------------------------------------------

enum class DecodeStatus {
    Ok,
    NeedMore,
    BadMagic,
    BadVersion,
    TooLarge,
};

// Looks at the start of a byte stream. On Ok, *out holds the header and the
// frame occupies sizeof(FrameHeader) + out->length bytes (maybe not all here
// yet: check frame_complete). Magic and version are checked before the
// length, so a peer speaking another protocol is told so precisely.
inline DecodeStatus decode_header(const uint8_t* data, size_t size, uint32_t max_payload,
                                  FrameHeader* out)
{
    if (size < sizeof(FrameHeader))
        return DecodeStatus::NeedMore;
    std::memcpy(out, data, sizeof(FrameHeader));
    if (out->magic != kMagic)
        return DecodeStatus::BadMagic;
    if (out->version != kVersion)
        return DecodeStatus::BadVersion;
    if (out->length > max_payload)
        return DecodeStatus::TooLarge;
    return DecodeStatus::Ok;
}

inline bool frame_complete(const FrameHeader& h, size_t size)
{
    return size >= sizeof(FrameHeader) + h.length;
}

inline constexpr size_t frame_size(uint32_t payload_length)
{
    return sizeof(FrameHeader) + payload_length;
}

// Writes header + payload into buf; returns the frame size, or 0 if it does
// not fit.
inline size_t encode(MsgType type, const void* payload, uint32_t length, uint8_t* buf,
                     size_t capacity)
{
    const size_t total = frame_size(length);
    if (total > capacity)
        return 0;
    const FrameHeader h{kMagic, kVersion, static_cast<uint16_t>(type), length, 0};
    std::memcpy(buf, &h, sizeof h);
    if (length != 0)
        std::memcpy(buf + sizeof h, payload, length);
    return total;
}

// ---- message types ------------------------------------------------------

// Which side sends each type: the only place that knows the ranges.
inline constexpr bool is_client_type(uint16_t t)
{
    return t >= static_cast<uint16_t>(MsgType::Hello) && t <= static_cast<uint16_t>(MsgType::Rates);
}
inline constexpr bool is_daemon_type(uint16_t t)
{
    return t >= static_cast<uint16_t>(MsgType::Welcome) &&
           t <= static_cast<uint16_t>(MsgType::KnownRates);
}
inline constexpr bool is_known_type(uint16_t t)
{
    return is_client_type(t) || is_daemon_type(t);
}

// Expected payload size for fixed-size types; variable-size types (Hello,
// Welcome, Settings, Status, Error) are checked by their decoders.
inline bool fixed_payload_size(MsgType type, uint32_t* size)
{
    switch (type) {
        case MsgType::Request:
        case MsgType::Released:
        case MsgType::Revoked:
            *size = sizeof(GpuMaskPayload);
            return true;
        case MsgType::Grant:
        case MsgType::Contended:
        case MsgType::Shrink:
            *size = sizeof(GrantPayload);
            return true;
        case MsgType::Stats:
            *size = sizeof(StatsPayload);
            return true;
        case MsgType::Rates:
        case MsgType::KnownRates:
            *size = sizeof(RatesPayload);
            return true;
        case MsgType::Drop:
            *size = sizeof(DropPayload);
            return true;
        case MsgType::Memory:
            *size = sizeof(MemoryPayload);
            return true;
        case MsgType::Unpageable:
            *size = sizeof(UnpageablePayload);
            return true;
        case MsgType::Waiting:
            *size = sizeof(WaitingPayload);
            return true;
        case MsgType::RevokeCause:
            *size = sizeof(RevokeCausePayload);
            return true;
        case MsgType::RunAhead:
            *size = sizeof(RunAheadPayload);
            return true;
        case MsgType::StatusQuery:
            *size = 0;
            return true;
        default:
            return false;
    }
}

// No fixed-size payload is larger (checked by a unit test over every type).
inline constexpr uint32_t kLargestFixedPayload = sizeof(StatsPayload);

// ---- typed messages of variable length ----------------------------------

struct Hello {
    char comm[kCommBytes];                // NUL-padded
    Priority priority = Priority::Unset;  // asked for by the process
    uint32_t gpu_count;
    HelloGpu gpus[kMaxGpusPerClient];
};

struct Settings {
    Mode mode;
    uint64_t time_quantum_us;
    uint32_t gpu_count;
    uint64_t capacities[kMaxGpusPerClient];  // in the client's Hello order
};

struct Welcome {
    uint64_t client_id;
    Settings settings;
};

// The text is not copied: it points into the decoded payload, or at the
// caller's string when encoding.
struct ErrorReply {
    ErrorCode code;
    const char* text;
    uint32_t text_length;
};

inline uint32_t payload_size(const Hello& m)
{
    return static_cast<uint32_t>(sizeof(HelloFixed) + m.gpu_count * sizeof(HelloGpu));
}
inline uint32_t payload_size(const Settings& m)
{
    return static_cast<uint32_t>(sizeof(SettingsFixed) + m.gpu_count * sizeof(uint64_t));
}
inline uint32_t payload_size(const Welcome& m)
{
    return static_cast<uint32_t>(sizeof(uint64_t)) + payload_size(m.settings);
}
inline uint32_t payload_size(const ErrorReply& m)
{
    return static_cast<uint32_t>(sizeof(ErrorFixed)) + m.text_length;
}

namespace detail {

// Appends to a frame being written; the caller checked the room first.
struct Writer {
    uint8_t* at;
    void put(const void* data, size_t n)
    {
        if (n != 0)
            std::memcpy(at, data, n);
        at += n;
    }
};

inline bool begin(MsgType type, uint32_t length, uint8_t* buf, size_t capacity, Writer* w)
{
    if (frame_size(length) > capacity)
        return false;
    const FrameHeader h{kMagic, kVersion, static_cast<uint16_t>(type), length, 0};
    std::memcpy(buf, &h, sizeof h);
    w->at = buf + sizeof h;
    return true;
}

inline void put_settings(Writer& w, const Settings& m)
{
    const SettingsFixed fixed{static_cast<uint32_t>(m.mode), m.gpu_count, m.time_quantum_us};
    w.put(&fixed, sizeof fixed);
    w.put(m.capacities, m.gpu_count * sizeof(uint64_t));
}

inline bool get_settings(const uint8_t* p, uint32_t length, Settings* out)
{
    SettingsFixed fixed{};
    if (length < sizeof fixed)
        return false;
    std::memcpy(&fixed, p, sizeof fixed);
    if (fixed.gpu_count > kMaxGpusPerClient ||
        length != sizeof fixed + fixed.gpu_count * sizeof(uint64_t))
        return false;
    out->mode = static_cast<Mode>(fixed.mode);
    out->time_quantum_us = fixed.time_quantum_us;
    out->gpu_count = fixed.gpu_count;
    std::memcpy(out->capacities, p + sizeof fixed, fixed.gpu_count * sizeof(uint64_t));
    return true;
}

}  // namespace detail

// Encoders write the whole frame; each returns its size, or 0 when it does
// not fit in `capacity` or the message is not valid (too many GPUs).
inline size_t encode(const Hello& m, uint8_t* buf, size_t capacity)
{
    detail::Writer w{};
    if (m.gpu_count > kMaxGpusPerClient ||
        !detail::begin(MsgType::Hello, payload_size(m), buf, capacity, &w))
        return 0;
    HelloFixed fixed{static_cast<uint32_t>(m.priority) & kHelloPriorityMask, m.gpu_count, {}};
    std::memcpy(fixed.comm, m.comm, sizeof fixed.comm);
    w.put(&fixed, sizeof fixed);
    w.put(m.gpus, m.gpu_count * sizeof(HelloGpu));
    return frame_size(payload_size(m));
}

inline size_t encode(const Settings& m, uint8_t* buf, size_t capacity)
{
    detail::Writer w{};
    if (m.gpu_count > kMaxGpusPerClient ||
        !detail::begin(MsgType::Settings, payload_size(m), buf, capacity, &w))
        return 0;
    detail::put_settings(w, m);
    return frame_size(payload_size(m));
}

inline size_t encode(const Welcome& m, uint8_t* buf, size_t capacity)
{
    detail::Writer w{};
    if (m.settings.gpu_count > kMaxGpusPerClient ||
        !detail::begin(MsgType::Welcome, payload_size(m), buf, capacity, &w))
        return 0;
    w.put(&m.client_id, sizeof m.client_id);
    detail::put_settings(w, m.settings);
    return frame_size(payload_size(m));
}

inline size_t encode(const ErrorReply& m, uint8_t* buf, size_t capacity)
{
    detail::Writer w{};
    if (!detail::begin(MsgType::Error, payload_size(m), buf, capacity, &w))
        return 0;
    const ErrorFixed fixed{static_cast<uint32_t>(m.code), 0};
    w.put(&fixed, sizeof fixed);
    w.put(m.text, m.text_length);
    return frame_size(payload_size(m));
}

// A fixed-size message: `payload` must be the layout `type` carries.
template <typename Payload>
size_t encode(MsgType type, const Payload& payload, uint8_t* buf, size_t capacity)
{
    static_assert(std::is_trivially_copyable_v<Payload>);
    uint32_t expected = 0;
    if (!fixed_payload_size(type, &expected) || expected != sizeof(Payload))
        return 0;
    return encode(type, &payload, sizeof(Payload), buf, capacity);
}

// Decoders: false when the payload is not a valid message of that kind
// (wrong length, too many GPUs); *out is then unspecified.
inline bool decode(const uint8_t* p, uint32_t length, Hello* out)
{
    HelloFixed fixed{};
    if (length < sizeof fixed)
        return false;
    std::memcpy(&fixed, p, sizeof fixed);
    if (fixed.gpu_count > kMaxGpusPerClient ||
        length != sizeof fixed + fixed.gpu_count * sizeof(HelloGpu))
        return false;
    std::memcpy(out->comm, fixed.comm, sizeof out->comm);
    out->priority = static_cast<Priority>(fixed.flags & kHelloPriorityMask);
    out->gpu_count = fixed.gpu_count;
    std::memcpy(out->gpus, p + sizeof fixed, fixed.gpu_count * sizeof(HelloGpu));
    return true;
}

inline bool decode(const uint8_t* p, uint32_t length, Settings* out)
{
    return detail::get_settings(p, length, out);
}

inline bool decode(const uint8_t* p, uint32_t length, Welcome* out)
{
    if (length < sizeof out->client_id)
        return false;
    std::memcpy(&out->client_id, p, sizeof out->client_id);
    return detail::get_settings(p + sizeof out->client_id,
                                length - static_cast<uint32_t>(sizeof out->client_id),
                                &out->settings);
}

inline bool decode(const uint8_t* p, uint32_t length, ErrorReply* out)
{
    ErrorFixed fixed{};
    if (length < sizeof fixed)
        return false;
    std::memcpy(&fixed, p, sizeof fixed);
    out->code = static_cast<ErrorCode>(fixed.code);
    out->text = reinterpret_cast<const char*>(p + sizeof fixed);
    out->text_length = length - static_cast<uint32_t>(sizeof fixed);
    return true;
}

// A fixed-size payload: the length must be exactly its layout's.
template <typename Payload>
bool decode(const uint8_t* p, uint32_t length, Payload* out)
{
    static_assert(std::is_trivially_copyable_v<Payload>);
    if (length != sizeof(Payload))
        return false;
    std::memcpy(out, p, sizeof(Payload));
    return true;
}

}  // namespace nvshare::proto
