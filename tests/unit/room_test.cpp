// The memory room on its own: its GPUs, clients and line are the test's,
// so what it decides can be checked against the order it is given.
#include "daemon/room.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "tests/support/sizes.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

using nvshare::test::GiB;

class RoomTest : public ::testing::Test {
protected:
    RoomTest()
        : room_(gpus_, clients_,
                {
                    [this](GpuIndex) -> const std::set<ClientId>& { return members_; },
                    [this](GpuIndex) { return line_; },
                    [this](GpuIndex, ClientId besides) -> std::optional<ClientId> {
                        for (ClientId id : line_)
                            if (id != besides)
                                return id;
                        return std::nullopt;
                    },
                })
    {
        Gpu gpu;
        gpu.capacity = 12 * GiB;
        gpu.description.physical_memory = 12 * GiB;
        gpus_.push_back(gpu);
        room_.add_gpu();
    }
    // Client `id` of user `uid` with `managed` bytes on GPU 0.
    ClientRecord& client(ClientId id, uint64_t managed, uint32_t uid = 1000)
    {
        ClientRecord& c = clients_[id];
        c.id = id;
        c.info = ClientInfo{static_cast<int32_t>(id), uid, "c"};
        c.gpus = {0};
        members_.insert(id);
        room_.set(c, 0, {managed, 0}, now_, out_);
        return c;
    }
    void hold(ClientId id)
    {
        clients_[id].held = gpu_bit(0);
        gpus_[0].holders.push_back(id);
        room_.granted(clients_[id]);
    }
    void let_go(ClientId id)
    {
        room_.let_go(clients_[id], gpu_bit(0));
        clients_[id].held = 0;
        std::erase(gpus_[0].holders, id);
    }
    uint64_t drop_keep(ClientId id)
    {
        Action a{ActionKind::Drop, id, gpu_bit(0)};
        room_.describe(a);
        return a.keep;
    }

    std::vector<Gpu> gpus_;
    std::map<ClientId, ClientRecord> clients_;
    std::set<ClientId> members_;
    std::vector<ClientId> line_;  // the scheduler's order, as this test sets it
    Room room_;
    std::vector<Action> out_;
    TimePoint now_{std::chrono::seconds(1000)};
};

// The keep leaves room for whoever the line says goes next: the room has no
// order of its own (arrival, here 2 before 3, does not count).
TEST_F(RoomTest, KeepLeavesRoomForWhomTheLineNamesNext)
{
    client(1, 8 * GiB);
    client(2, 10 * GiB);
    client(3, 5 * GiB);
    hold(1);
    ASSERT_TRUE(room_.oversubscribed(0));
    line_ = {2, 3};
    EXPECT_EQ(drop_keep(1), 2 * GiB);  // 12 less 2's 10
    line_ = {3, 2};
    EXPECT_EQ(drop_keep(1), 7 * GiB);  // 12 less 3's 5
    line_ = {};
    EXPECT_EQ(drop_keep(1), UINT64_MAX) << "nobody to make room for";
}

// A Shrink round asks those not in line first, then the line from its end.
TEST_F(RoomTest, ShrinkAsksTheLastInLineFirst)
{
    client(1, 4 * GiB);
    client(2, 4 * GiB);
    client(3, 4 * GiB);
    for (ClientId id : {1, 2, 3}) {
        hold(id);
        let_go(id);  // never told of the oversubscription: it kept everything
    }
    client(4, 6 * GiB);
    hold(4);  // needs 6 of 12: 6 GiB of the 12 kept must go
    line_ = {3, 1};
    out_.clear();
    EXPECT_EQ(room_.publish_shrinks(now_, out_), gpu_bit(0));
    std::map<ClientId, uint64_t> keeps;
    for (const Action& a : out_)
        if (a.kind == ActionKind::Shrink)
            keeps[a.client] = a.keep;
    // 3 goes next and keeps its 4; 1 keeps 2; 2 waits for nothing, keeps none.
    EXPECT_EQ(keeps, (std::map<ClientId, uint64_t>{{1, 2 * GiB}, {2, 0}}));
    EXPECT_EQ(room_.short_of_room_until(0), now_ + Room::kGrowthRound);
}

// What a holder measured it lacks asks those that keep memory for it, though
// the reported sums leave room (contexts and the driver's own memory are in
// no report); only a holder's word counts, once, and never past what is kept.
TEST_F(RoomTest, AHolderShortOfRoomGetsWhatItMeasuredNotOnlyWhatTheSumsSay)
{
    client(1, 4 * GiB);
    hold(1);
    let_go(1);  // keeps its 4 GiB
    client(2, 6 * GiB);
    client(3, 3 * GiB);  // 13 of 12: oversubscribed
    hold(2);             // needs 6; 12 - 6 leaves room for the 4 kept
    line_ = {1};
    out_.clear();
    EXPECT_EQ(room_.publish_shrinks(now_, out_), 0u) << "the sums leave room: nobody asked";

    room_.want_room(clients_[3], 0, 1 * GiB);  // 3 does not hold the GPU
    EXPECT_EQ(room_.publish_shrinks(now_, out_), 0u);
    EXPECT_TRUE(out_.empty());

    room_.want_room(clients_[2], 0, 1 * GiB + 1);
    EXPECT_EQ(room_.publish_shrinks(now_, out_), gpu_bit(0));
    ASSERT_EQ(out_.size(), 1u);
    EXPECT_EQ(out_[0].kind, ActionKind::Shrink);
    EXPECT_EQ(out_[0].client, 1u);
    EXPECT_EQ(out_[0].keep, 3 * GiB - 1);

    out_.clear();
    room_.changed(gpu_bit(0));
    EXPECT_EQ(room_.publish_shrinks(now_ + 5s, out_), 0u) << "a want is answered once";

    room_.want_room(clients_[2], 0, 1);  // less than a step: a step
    EXPECT_EQ(room_.publish_shrinks(now_ + 10s, out_), gpu_bit(0));
    ASSERT_EQ(out_.size(), 1u);
    EXPECT_EQ(out_[0].keep, 3 * GiB - 1 - Room::kShrinkStep);

    out_.clear();
    room_.want_room(clients_[2], 0, 100 * GiB);  // more than anyone keeps
    EXPECT_EQ(room_.publish_shrinks(now_ + 20s, out_), gpu_bit(0));
    ASSERT_EQ(out_.size(), 1u);
    EXPECT_EQ(out_[0].keep, 0u);
}

// In group turns the holders keep the GPU in grant order while they fit.
TEST_F(RoomTest, HoldersBeyondTheFitAreNamed)
{
    std::vector<ClientRecord*> holders{&client(1, 5 * GiB), &client(2, 8 * GiB),
                                       &client(3, 2 * GiB)};
    for (ClientRecord* h : holders)
        hold(h->id);
    // 5 + 8 exceed 12: 2 and everybody after it.
    EXPECT_EQ(room_.beyond_fit(0, holders), (std::vector<ClientRecord*>{holders[1], holders[2]}));
}

// The room lists when each running grace of an unconfirmed claim ends,
// so that the scheduler sets the claim again then, and forgets a client's.
TEST_F(RoomTest, GraceEndsAreListedUntilTheyCome)
{
    ClientRecord& a = client(1, 0);
    Room::confirm(a, 0, 1 * GiB);
    room_.set(a, 0, {4 * GiB, 0}, now_, out_);
    EXPECT_EQ(room_.next_grace_end(), now_ + kClaimGrace);
    EXPECT_FALSE(room_.grace_ended(now_ + kClaimGrace - 1s));
    // It waits for its turn: its grace runs on, the earlier end is gone.
    room_.set(a, 0, {4 * GiB, 0}, now_ + 2s, out_, ClaimTurn::Waits);
    EXPECT_EQ(room_.next_grace_end(), now_ + 2s + kClaimGrace);
    ClientRecord& b = client(2, 0, 1001);  // each of another user: one grace each
    Room::confirm(b, 0, 0);
    room_.set(b, 0, {2 * GiB, 0}, now_ + 1s, out_);
    EXPECT_EQ(room_.next_grace_end(), now_ + 1s + kClaimGrace);
    const auto ended = room_.grace_ended(now_ + 2s + kClaimGrace);
    ASSERT_TRUE(ended);
    EXPECT_EQ(*ended, std::pair(ClientId{2}, GpuIndex{0}));
    EXPECT_EQ(room_.grace_ended(now_ + 2s + kClaimGrace), std::pair(ClientId{1}, GpuIndex{0}));
    EXPECT_FALSE(room_.grace_ended(now_ + 1h));
    EXPECT_FALSE(room_.next_grace_end());
    // Set again once it ended: no new grace while the host owes the last.
    room_.set(a, 0, {4 * GiB, 0}, now_ + 1h, out_);
    EXPECT_FALSE(room_.next_grace_end());
    // A client that leaves takes its grace along.
    ClientRecord& c = client(3, 0, 1002);
    Room::confirm(c, 0, 0);
    room_.set(c, 0, {2 * GiB, 0}, now_ + 1h, out_);
    EXPECT_EQ(room_.next_grace_end(), now_ + 1h + kClaimGrace);
    room_.forget(c, now_ + 1h);
    EXPECT_FALSE(room_.next_grace_end());
}

}  // namespace
