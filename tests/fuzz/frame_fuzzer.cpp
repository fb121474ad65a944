// libFuzzer target for the codec of the wire protocol (common/codec.h).
//
// The input is a byte stream from a client, cut into reads the way the
// socket might deliver it. It is reassembled exactly as the daemon does
// (Connection::read(), then Server::process_input(): decode_header,
// frame_complete, consume, keep the rest) and each
// frame is checked the way Server::handle_frame() checks it (is_known_type,
// is_client_type, fixed_payload_size, the typed decoders), then the same
// bytes are decoded the way a client decodes the daemon's replies.
//
// Besides the sanitizers, it checks properties that must hold for any input:
// the reassembly buffer stays bounded, every byte is accounted for, and how
// the stream is cut into reads never changes what is decoded, and every
// message a decoder accepts encodes back to a frame that decodes the same.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/codec.h"

namespace {

using namespace nvshare::proto;

// Connection::read() reads at most this much per call.
constexpr size_t kReadSize = 8192;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "frame_fuzzer: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

// What the daemon makes of one client frame.
enum class Verdict { Accepted, BadType, BadLength, BadOrder, BadValue };

struct Outcome {
    std::vector<std::string> frames;  // type, length and verdict of each decoded frame
    std::string error;                // how the stream ended, if with an error
    size_t consumed = 0;              // bytes of whole frames taken off the stream
    size_t max_buffered = 0;
};

uint32_t g_registered_gpus = 0;

bool same(const Hello& a, const Hello& b)
{
    return memcmp(a.comm, b.comm, sizeof a.comm) == 0 && a.gpu_count == b.gpu_count &&
           memcmp(a.gpus, b.gpus, a.gpu_count * sizeof(HelloGpu)) == 0;
}
bool same(const Settings& a, const Settings& b)
{
    return a.mode == b.mode && a.time_quantum_us == b.time_quantum_us &&
           a.gpu_count == b.gpu_count &&
           memcmp(a.capacities, b.capacities, a.gpu_count * sizeof(uint64_t)) == 0;
}
bool same(const Welcome& a, const Welcome& b)
{
    return a.client_id == b.client_id && same(a.settings, b.settings);
}
bool same(const ErrorReply& a, const ErrorReply& b)
{
    return a.code == b.code && a.text_length == b.text_length &&
           memcmp(a.text, b.text, a.text_length) == 0;
}

// A decoded message encodes to a frame of its declared size that decodes
// to the same message.
template <typename Message>
void round_trip(const Message& m)
{
    std::vector<uint8_t> frame(frame_size(payload_size(m)));
    CHECK(encode(m, frame.data(), frame.size()) == frame.size());
    CHECK(encode(m, frame.data(), frame.size() - 1) == 0);  // never past the end
    FrameHeader h{};
    CHECK(decode_header(frame.data(), frame.size(), kMaxDaemonPayload, &h) == DecodeStatus::Ok);
    CHECK(frame_complete(h, frame.size()) && h.length == payload_size(m));
    Message again;
    CHECK(decode(frame.data() + sizeof h, h.length, &again));
    CHECK(same(m, again));
}

// Server::handle_frame()/handle_hello(), minus the scheduler.
Verdict check_frame(const FrameHeader& h, const uint8_t* payload, bool* registered)
{
    if (!is_known_type(h.type))
        return Verdict::BadType;
    const auto type = static_cast<MsgType>(h.type);
    if (type == MsgType::Hello) {
        if (*registered)
            return Verdict::BadOrder;
        Hello hello;
        if (!decode(payload, h.length, &hello))
            return Verdict::BadLength;
        CHECK(hello.gpu_count <= kMaxGpusPerClient);
        CHECK(h.length == payload_size(hello));
        round_trip(hello);
        *registered = true;
        g_registered_gpus = hello.gpu_count;
        return Verdict::Accepted;
    }
    uint32_t expected = 0;
    if (!is_client_type(h.type) || !fixed_payload_size(type, &expected))
        return Verdict::BadType;
    if (h.length != expected)
        return Verdict::BadLength;
    if (type == MsgType::StatusQuery)
        return Verdict::Accepted;
    if (!*registered)
        return Verdict::BadOrder;
    if (type == MsgType::Memory) {
        MemoryPayload m;
        CHECK(decode(payload, h.length, &m));
        return m.gpu < g_registered_gpus ? Verdict::Accepted : Verdict::BadValue;
    }
    if (type == MsgType::Stats) {
        StatsPayload st;
        CHECK(decode(payload, h.length, &st));
        return st.gpu < g_registered_gpus ? Verdict::Accepted : Verdict::BadValue;
    }
    GpuMaskPayload m;
    CHECK(decode(payload, h.length, &m));
    const uint64_t known = g_registered_gpus >= 64 ? ~0ull : (1ull << g_registered_gpus) - 1;
    return (m.gpus & ~known) == 0 ? Verdict::Accepted : Verdict::BadValue;
}

// The daemon's reassembly (Connection::read(), Server::process_input()),
// fed `stream` in reads of the given sizes.
Outcome reassemble(const uint8_t* stream, size_t size, const std::vector<size_t>& reads)
{
    Outcome out;
    std::vector<uint8_t> in;
    bool registered = false;
    g_registered_gpus = 0;
    size_t pos = 0, next_read = 0;
    while (pos < size && out.error.empty()) {
        size_t n = reads.empty() ? size : reads[next_read++ % reads.size()];
        n = std::min({n, kReadSize, size - pos});
        in.insert(in.end(), stream + pos, stream + pos + n);
        pos += n;
        out.max_buffered = std::max(out.max_buffered, in.size());
        size_t off = 0;
        while (out.error.empty()) {
            FrameHeader h{};
            const auto st = decode_header(in.data() + off, in.size() - off, kMaxClientPayload, &h);
            if (st == DecodeStatus::NeedMore)
                break;
            if (st != DecodeStatus::Ok) {
                out.error = "decode " + std::to_string(static_cast<int>(st));
                if (st == DecodeStatus::TooLarge)
                    CHECK(h.length > kMaxClientPayload);
                break;
            }
            CHECK(h.magic == kMagic && h.version == kVersion && h.length <= kMaxClientPayload);
            if (!frame_complete(h, in.size() - off))
                break;
            const uint8_t* payload = in.data() + off + sizeof h;
            off += sizeof h + h.length;
            out.consumed += sizeof h + h.length;
            const Verdict v = check_frame(h, payload, &registered);
            out.frames.push_back(std::to_string(h.type) + "/" + std::to_string(h.length) + "/" +
                                 std::to_string(static_cast<int>(v)));
            if (v != Verdict::Accepted)
                out.error = "frame";
        }
        in.erase(in.begin(), in.begin() + static_cast<ptrdiff_t>(std::min(off, in.size())));
    }
    // The buffer never holds more than one maximal frame plus one read.
    CHECK(out.max_buffered <= sizeof(FrameHeader) + kMaxClientPayload + kReadSize);
    if (out.error.empty())
        CHECK(out.consumed + in.size() == size);
    return out;
}

// The same bytes as the daemon's replies, decoded the way a client does.
void decode_as_client(const uint8_t* data, size_t size)
{
    size_t off = 0;
    for (;;) {
        FrameHeader h{};
        if (decode_header(data + off, size - off, kMaxDaemonPayload, &h) != DecodeStatus::Ok ||
            !frame_complete(h, size - off))
            return;
        const uint8_t* payload = data + off + sizeof h;
        const auto type = static_cast<MsgType>(h.type);
        if (type == MsgType::Settings) {
            Settings st;
            if (decode(payload, h.length, &st)) {
                CHECK(st.gpu_count <= kMaxGpusPerClient && h.length == payload_size(st));
                round_trip(st);
            }
        } else if (type == MsgType::Welcome) {
            Welcome w;
            if (decode(payload, h.length, &w)) {
                CHECK(h.length == payload_size(w));
                round_trip(w);
            }
        } else if (type == MsgType::Error) {
            ErrorReply e;
            if (decode(payload, h.length, &e)) {
                CHECK(e.text + e.text_length == reinterpret_cast<const char*>(payload) + h.length);
                round_trip(e);
            }
        } else {
            uint32_t expected = 0;
            if (fixed_payload_size(type, &expected) && expected == h.length && expected > 0) {
                uint8_t copy[kLargestFixedPayload];
                CHECK(expected <= sizeof copy);
                memcpy(copy, payload, expected);
            }
        }
        off += sizeof h + h.length;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    // First byte: how many read sizes follow (0-15); then one byte each.
    if (size == 0)
        return 0;
    const size_t plan = std::min<size_t>(data[0] & 15, size - 1);
    std::vector<size_t> reads;
    for (size_t i = 0; i < plan; ++i)
        reads.push_back(data[1 + i] == 0 ? kReadSize : data[1 + i]);
    const uint8_t* stream = data + 1 + plan;
    const size_t stream_size = size - 1 - plan;

    const Outcome whole = reassemble(stream, stream_size, {});
    const Outcome cut = reassemble(stream, stream_size, reads);
    const Outcome bytewise = reassemble(stream, stream_size, {1});
    // How the stream arrives must not change what is made of it.
    CHECK(whole.frames == cut.frames && whole.error == cut.error);
    CHECK(whole.frames == bytewise.frames && whole.error == bytewise.error);
    CHECK(whole.consumed == cut.consumed && whole.consumed == bytewise.consumed);

    decode_as_client(stream, stream_size);
    return 0;
}
