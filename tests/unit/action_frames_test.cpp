#include "daemon/action_frames.h"

#include <gtest/gtest.h>

#include <string>

using nvshare::daemon::Action;
using nvshare::daemon::ActionKind;
using nvshare::daemon::ClientRecord;
using nvshare::daemon::gpu_bit;
using nvshare::daemon::local_index;
using nvshare::daemon::TimePoint;
using nvshare::daemon::waiting_payload;
using nvshare::proto::kCommBytes;
using namespace std::chrono_literals;

namespace {

const TimePoint kWaited = TimePoint{} + 1h;

ClientRecord record(std::vector<uint32_t> gpus, std::string comm)
{
    ClientRecord r;
    r.gpus = std::move(gpus);
    r.info.pid = 42;
    r.info.uid = 1000;
    r.info.comm = std::move(comm);
    return r;
}

Action waiting_on(uint32_t gpu, TimePoint held_since)
{
    Action a{};
    a.kind = ActionKind::Waiting;
    a.gpus = gpu_bit(gpu);
    a.wait.place = 2;
    a.wait.held_since = held_since;
    a.wait.quantum = 30s;
    return a;
}

TEST(ActionFrames, AGpuIsNamedByItsHelloIndex)
{
    const ClientRecord client = record({3, 5}, "train");
    EXPECT_EQ(local_index(client, gpu_bit(3)), 0u);
    EXPECT_EQ(local_index(client, gpu_bit(5)), 1u);
    EXPECT_EQ(local_index(client, gpu_bit(7)), 2u);  // not its GPU: past its last
}

TEST(ActionFrames, AWaitingFrameNamesTheHolderCutAtACharacter)
{
    const ClientRecord client = record({3, 5}, "waiter");
    // "é" (two bytes) straddles the field's end: left out whole.
    const std::string name = std::string(kCommBytes - 1, 'a') + "\xC3\xA9";
    const ClientRecord holder = record({5}, name);
    const auto p = waiting_payload(client, waiting_on(5, kWaited), &holder, kWaited + 2s);
    EXPECT_EQ(p.gpu, 1u);
    EXPECT_EQ(p.place, 2u);
    EXPECT_EQ(p.holder_pid, 42);
    EXPECT_EQ(p.holder_uid, 1000u);
    EXPECT_EQ(p.held_us, 2000000u);
    EXPECT_EQ(p.quantum_us, 30000000u);
    EXPECT_EQ(std::string(p.holder_comm, kCommBytes - 1), std::string(kCommBytes - 1, 'a'));
    EXPECT_EQ(p.holder_comm[kCommBytes - 1], '\0');
    // A name that fits is copied whole.
    const ClientRecord short_name = record({5}, "h\xC3\xA9");
    const auto q = waiting_payload(client, waiting_on(5, kWaited), &short_name, kWaited);
    EXPECT_STREQ(q.holder_comm, "h\xC3\xA9");
}

TEST(ActionFrames, AWaitingFrameWithoutAHolderNamesNobody)
{
    const ClientRecord client = record({3}, "waiter");
    const auto p = waiting_payload(client, waiting_on(3, kWaited), nullptr, kWaited + 1s);
    EXPECT_EQ(p.place, 2u);
    EXPECT_EQ(p.holder_pid, 0);
    EXPECT_EQ(p.held_us, 0u);
    EXPECT_EQ(p.quantum_us, 0u);
    EXPECT_EQ(p.holder_comm[0], '\0');
}

TEST(ActionFrames, AHoldAfterNowCountsAsNoneYet)
{
    const ClientRecord client = record({3}, "waiter");
    const ClientRecord holder = record({3}, "holder");
    const auto p = waiting_payload(client, waiting_on(3, kWaited + 1s), &holder, kWaited);
    EXPECT_EQ(p.held_us, 0u);
}

}  // namespace
