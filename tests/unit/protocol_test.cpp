#include "common/protocol.h"

#include <gtest/gtest.h>

#include <vector>

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
    HelloFixed out{};
    EXPECT_TRUE(hello_length_valid(p.data(), static_cast<uint32_t>(p.size()), &out));
    EXPECT_FALSE(hello_length_valid(p.data(), static_cast<uint32_t>(p.size() - 1), &out));
    fixed.gpu_count = kMaxGpusPerClient + 1;
    std::memcpy(p.data(), &fixed, sizeof fixed);
    EXPECT_FALSE(hello_length_valid(p.data(), static_cast<uint32_t>(p.size()), &out));
    EXPECT_FALSE(hello_length_valid(p.data(), sizeof(HelloFixed) - 1, &out));
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
    EXPECT_FALSE(is_known_type(7));
    EXPECT_FALSE(is_known_type(0));
    EXPECT_TRUE(is_known_type(26));
    EXPECT_FALSE(is_known_type(27));
}
