#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/codec.h"

using namespace nvshare::proto;

namespace {

std::vector<uint8_t> frame(MsgType type, const void* payload, uint32_t length)
{
    std::vector<uint8_t> buf(sizeof(FrameHeader) + length);
    EXPECT_EQ(encode(type, payload, length, buf.data(), buf.size()), buf.size());
    return buf;
}

}  // namespace

TEST(Protocol, RoundTripsAFrame)
{
    const GpuMaskPayload p{0b101};
    const auto buf = frame(MsgType::Request, &p, sizeof p);
    FrameHeader h{};
    ASSERT_EQ(decode_header(buf.data(), buf.size(), kMaxClientPayload, &h), DecodeStatus::Ok);
    EXPECT_EQ(h.type, static_cast<uint16_t>(MsgType::Request));
    EXPECT_EQ(h.length, sizeof p);
    EXPECT_TRUE(frame_complete(h, buf.size()));
    GpuMaskPayload back{};
    std::memcpy(&back, buf.data() + sizeof h, sizeof back);
    EXPECT_EQ(back.gpus, 0b101u);
}

TEST(Protocol, NeedsMoreUntilTheHeaderIsComplete)
{
    const auto buf = frame(MsgType::StatusQuery, nullptr, 0);
    FrameHeader h{};
    for (size_t n = 0; n < sizeof(FrameHeader); ++n)
        EXPECT_EQ(decode_header(buf.data(), n, kMaxClientPayload, &h), DecodeStatus::NeedMore);
}

TEST(Protocol, PartialPayloadIsNotComplete)
{
    const MemoryPayload m{0, 0, 1, 2};
    const auto buf = frame(MsgType::Memory, &m, sizeof m);
    FrameHeader h{};
    ASSERT_EQ(decode_header(buf.data(), buf.size() - 1, kMaxClientPayload, &h), DecodeStatus::Ok);
    EXPECT_FALSE(frame_complete(h, buf.size() - 1));
}

TEST(Protocol, RejectsBadMagicVersionAndLength)
{
    auto buf = frame(MsgType::StatusQuery, nullptr, 0);
    FrameHeader h{};
    auto bad = buf;
    bad[0] ^= 0xff;
    EXPECT_EQ(decode_header(bad.data(), bad.size(), kMaxClientPayload, &h), DecodeStatus::BadMagic);
    bad = buf;
    bad[4] = 99;
    EXPECT_EQ(decode_header(bad.data(), bad.size(), kMaxClientPayload, &h),
              DecodeStatus::BadVersion);
    EXPECT_EQ(h.version, 99);
    bad = buf;
    const uint32_t huge = kMaxClientPayload + 1;
    std::memcpy(bad.data() + 8, &huge, sizeof huge);
    EXPECT_EQ(decode_header(bad.data(), bad.size(), kMaxClientPayload, &h), DecodeStatus::TooLarge);
}

TEST(Protocol, KeepAllowanceOnTheWire)
{
    static_assert(keep_to_wire(UINT64_MAX) == kKeepEverything);
    static_assert(keep_from_wire(kKeepEverything) == UINT64_MAX);
    EXPECT_EQ(keep_to_wire(0), 0u);
    EXPECT_EQ(keep_to_wire((5ull << 20) + 12345), 5u);  // rounded down: never more
    EXPECT_EQ(keep_from_wire(keep_to_wire(4ull << 30)), 4ull << 30);
    EXPECT_EQ(keep_to_wire(UINT64_MAX - 1), kKeepEverything - 1);  // huge but finite
}

TEST(Protocol, EncodeRefusesASmallBuffer)
{
    uint8_t buf[sizeof(FrameHeader) + 3];
    const GpuMaskPayload p{1};
    EXPECT_EQ(encode(MsgType::Request, &p, sizeof p, buf, sizeof buf), 0u);
}

TEST(Protocol, HelloLengthMustMatchItsGpuCount)
{
    std::vector<uint8_t> p(sizeof(HelloFixed) + 2 * sizeof(HelloGpu));
    HelloFixed fixed{0, 2, "test"};
    std::memcpy(p.data(), &fixed, sizeof fixed);
    Hello out{};
    EXPECT_TRUE(decode(p.data(), static_cast<uint32_t>(p.size()), &out));
    EXPECT_EQ(out.gpu_count, 2u);
    EXPECT_STREQ(out.comm, "test");
    EXPECT_FALSE(decode(p.data(), static_cast<uint32_t>(p.size() - 1), &out));
    fixed.gpu_count = kMaxGpusPerClient + 1;
    std::memcpy(p.data(), &fixed, sizeof fixed);
    EXPECT_FALSE(decode(p.data(), static_cast<uint32_t>(p.size()), &out));
    EXPECT_FALSE(decode(p.data(), sizeof(HelloFixed) - 1, &out));
}

// Each typed message: encoded at its declared size, in the documented
// layout, and decoded back to itself.
TEST(Codec, HelloRoundTripsInTheDocumentedLayout)
{
    Hello m{};
    std::memcpy(m.comm, "train.py", 8);
    m.gpu_count = 2;
    m.gpus[1].physical_memory = 80ull << 30;
    std::vector<uint8_t> frame(frame_size(payload_size(m)));
    ASSERT_EQ(encode(m, frame.data(), frame.size()), frame.size());
    EXPECT_EQ(frame.size(), sizeof(FrameHeader) + 24 + 2 * 88);
    HelloFixed fixed{};
    std::memcpy(&fixed, frame.data() + sizeof(FrameHeader), sizeof fixed);
    EXPECT_EQ(fixed.gpu_count, 2u);
    Hello back{};
    ASSERT_TRUE(decode(frame.data() + sizeof(FrameHeader), payload_size(m), &back));
    EXPECT_EQ(back.gpus[1].physical_memory, 80ull << 30);
    EXPECT_EQ(encode(m, frame.data(), frame.size() - 1), 0u);
    m.gpu_count = kMaxGpusPerClient + 1;
    EXPECT_EQ(encode(m, frame.data(), frame.size()), 0u);
}

TEST(Codec, WelcomeAndSettingsRoundTrip)
{
    Welcome w{};
    w.client_id = 7;
    w.settings = {Mode::Auto, 30000000, 3, {1, 2, 3}};
    std::vector<uint8_t> frame(frame_size(payload_size(w)));
    ASSERT_EQ(encode(w, frame.data(), frame.size()), frame.size());
    EXPECT_EQ(payload_size(w), sizeof(WelcomeFixed) + 3 * sizeof(uint64_t));
    WelcomeFixed fixed{};
    std::memcpy(&fixed, frame.data() + sizeof(FrameHeader), sizeof fixed);
    EXPECT_EQ(fixed.client_id, 7u);
    EXPECT_EQ(fixed.settings.time_quantum_us, 30000000u);
    Welcome back{};
    ASSERT_TRUE(decode(frame.data() + sizeof(FrameHeader), payload_size(w), &back));
    EXPECT_EQ(back.settings.mode, Mode::Auto);
    EXPECT_EQ(back.settings.capacities[2], 3u);
    // A count that disagrees with the length is refused.
    EXPECT_FALSE(decode(frame.data() + sizeof(FrameHeader), payload_size(w) - 8, &back));

    Settings st = w.settings;
    std::vector<uint8_t> sf(frame_size(payload_size(st)));
    ASSERT_EQ(encode(st, sf.data(), sf.size()), sf.size());
    FrameHeader h{};
    std::memcpy(&h, sf.data(), sizeof h);
    EXPECT_EQ(h.type, static_cast<uint16_t>(MsgType::Settings));
    Settings st_back{};
    ASSERT_TRUE(decode(sf.data() + sizeof h, h.length, &st_back));
    EXPECT_EQ(st_back.gpu_count, 3u);
}

TEST(Codec, ErrorCarriesItsText)
{
    const std::string text = "Hello must come first";
    const ErrorReply e{ErrorCode::BadOrder, text.data(), static_cast<uint32_t>(text.size())};
    std::vector<uint8_t> frame(frame_size(payload_size(e)));
    ASSERT_EQ(encode(e, frame.data(), frame.size()), frame.size());
    ErrorReply back{};
    ASSERT_TRUE(decode(frame.data() + sizeof(FrameHeader), payload_size(e), &back));
    EXPECT_EQ(back.code, ErrorCode::BadOrder);
    EXPECT_EQ(std::string(back.text, back.text_length), text);
    EXPECT_FALSE(decode(frame.data(), sizeof(ErrorFixed) - 1, &back));
}

TEST(Codec, FixedPayloadsMustMatchTheirType)
{
    uint8_t buf[64];
    const GrantPayload g{1, kGrantExclusive, 0};
    EXPECT_EQ(encode(MsgType::Grant, g, buf, sizeof buf), sizeof(FrameHeader) + sizeof g);
    EXPECT_EQ(encode(MsgType::Request, g, buf, sizeof buf), 0u);  // a Request is a GpuMask
    GrantPayload back{};
    EXPECT_TRUE(decode(buf + sizeof(FrameHeader), sizeof g, &back));
    EXPECT_EQ(back.flags, kGrantExclusive);
    EXPECT_FALSE(decode(buf + sizeof(FrameHeader), sizeof g - 1, &back));
}

TEST(Codec, TypesBelongToOneSide)
{
    for (uint32_t t = 0; t <= 0xffff; ++t) {
        const auto type = static_cast<uint16_t>(t);
        EXPECT_FALSE(is_client_type(type) && is_daemon_type(type)) << t;
        EXPECT_EQ(is_known_type(type), is_client_type(type) || is_daemon_type(type)) << t;
    }
    EXPECT_TRUE(is_client_type(static_cast<uint16_t>(MsgType::Stats)));
    EXPECT_TRUE(is_daemon_type(static_cast<uint16_t>(MsgType::RevokeCause)));
}

TEST(Protocol, NoFixedPayloadIsLargerThanTheLargest)
{
    for (uint32_t t = 0; t <= 0xffff; ++t) {
        uint32_t n = 0;
        if (fixed_payload_size(static_cast<MsgType>(t), &n)) {
            EXPECT_LE(n, kLargestFixedPayload) << "type " << t;
        }
    }
}

TEST(Protocol, FixedSizesAreKnownOnlyForFixedTypes)
{
    uint32_t n = 0;
    EXPECT_TRUE(fixed_payload_size(MsgType::Request, &n));
    EXPECT_EQ(n, 8u);
    EXPECT_TRUE(fixed_payload_size(MsgType::Memory, &n));
    EXPECT_EQ(n, sizeof(MemoryPayload));
    EXPECT_FALSE(fixed_payload_size(MsgType::Hello, &n));
    EXPECT_FALSE(fixed_payload_size(MsgType::Status, &n));
    EXPECT_TRUE(is_known_type(1));
    EXPECT_TRUE(is_known_type(6));
    EXPECT_TRUE(is_known_type(7));
    EXPECT_FALSE(is_known_type(8));
    EXPECT_FALSE(is_known_type(0));
    EXPECT_TRUE(is_known_type(27));
    EXPECT_TRUE(is_known_type(28));
    EXPECT_TRUE(is_known_type(29));
    EXPECT_FALSE(is_known_type(30));
    EXPECT_TRUE(fixed_payload_size(MsgType::RunAhead, &n));
    EXPECT_EQ(n, sizeof(RunAheadPayload));
    EXPECT_TRUE(fixed_payload_size(MsgType::Shrink, &n));
    EXPECT_EQ(n, sizeof(GrantPayload));
    // Rates from a client, KnownRates from the daemon: one layout.
    EXPECT_TRUE(is_client_type(static_cast<uint16_t>(MsgType::Rates)));
    EXPECT_TRUE(is_daemon_type(static_cast<uint16_t>(MsgType::KnownRates)));
    EXPECT_TRUE(fixed_payload_size(MsgType::Rates, &n));
    EXPECT_EQ(n, sizeof(RatesPayload));
    EXPECT_TRUE(fixed_payload_size(MsgType::KnownRates, &n));
    EXPECT_EQ(n, sizeof(RatesPayload));
}
