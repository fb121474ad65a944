#include "daemon/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "tests/support/sizes.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

using nvshare::test::GiB;

class SchedulerTest : public ::testing::Test {
protected:
    SchedulerTest() : s_(SchedulerSettings{Mode::On, 30s, 10s}) {}

    GpuIndex gpu(int n, uint64_t memory = 80 * GiB)
    {
        return *s_.ensure_gpu({"GPU-" + std::to_string(n), "test", memory});
    }
    void client(ClientId id, std::vector<GpuIndex> gpus = {0})
    {
        ASSERT_TRUE(s_.connect(id, {static_cast<int32_t>(id), 1000, "c"}, gpus));
    }
    // The host (NVML) confirms up to `bytes` of client `id`'s memory on
    // GPU 0: its pinned memory counts for others.
    void host_confirms(ClientId id, uint64_t bytes = 80 * GiB)
    {
        s_.confirm_memory(id, 0, bytes, now_);
    }
    void advance(Duration d)
    {
        now_ += d;
        s_.tick(now_);
    }
    // Auto mode on one GPU of `capacity`, with clients 1..n of `each` bytes.
    void auto_clients(uint64_t capacity, ClientId n, uint64_t each)
    {
        s_.set_mode(Mode::Auto, now_);
        gpu(0, capacity);
        for (ClientId id = 1; id <= n; ++id) {
            client(id);
            s_.report_memory(id, 0, {each, 0}, now_);
        }
    }
    // Actions since the last call, as "G1" (grant to 1), "D1", "R1", "C1", "S1".
    std::vector<std::string> actions()
    {
        std::vector<std::string> out;
        last_ = s_.take_actions();
        for (const Action& a : last_) {
            if (a.kind == ActionKind::Unpageable || a.kind == ActionKind::RunAhead)
                continue;  // see unpageable(); run-ahead has its own tests
            if (a.kind == ActionKind::Waiting) {
                waits_.push_back(a);  // see waits()
                continue;
            }
            if (a.kind == ActionKind::Grant)
                grant_contended_[a.client] = a.contended;
            const char* k = a.kind == ActionKind::Grant    ? "G"
                            : a.kind == ActionKind::Drop   ? "D"
                            : a.kind == ActionKind::Revoke ? "R"
                            : a.kind == ActionKind::Shrink ? "S"
                                                           : "C";
            out.push_back(k + std::to_string(a.client));
        }
        return out;
    }
    using V = std::vector<std::string>;
    // Unpageable actions since the last call: client -> others' pinned bytes.
    std::map<ClientId, uint64_t> unpageable()
    {
        std::map<ClientId, uint64_t> out;
        for (const Action& a : s_.take_actions())
            if (a.kind == ActionKind::Unpageable)
                out[a.client] = a.others_pinned;
        return out;
    }
    using U = std::map<ClientId, uint64_t>;
    // All actions since the last call but Waiting (see waits()).
    std::vector<Action> decisions()
    {
        std::vector<Action> out;
        for (const Action& a : s_.take_actions())
            if (a.kind != ActionKind::Waiting)
                out.push_back(a);
        return out;
    }
    // Waiting actions since the last call, as "client:place:holder:reason"
    // (holder 0: none; reason as in proto::WaitReason).
    std::vector<std::string> waits()
    {
        actions();
        std::vector<std::string> out;
        for (const Action& a : waits_)
            out.push_back(std::to_string(a.client) + ":" + std::to_string(a.wait.place) + ":" +
                          std::to_string(a.wait.holder.value_or(0)) + ":" +
                          std::to_string(static_cast<int>(a.wait.reason)));
        waits_.clear();
        return out;
    }
    // The action of this kind among those the last actions() call took.
    const Action* last(ActionKind kind) const
    {
        for (const Action& a : last_)
            if (a.kind == kind)
                return &a;
        return nullptr;
    }

    Scheduler s_;
    TimePoint now_{std::chrono::seconds(1000)};
    std::map<ClientId, bool> grant_contended_;  // CONTENDED flag of each client's last Grant
    std::vector<Action> last_;
    std::vector<Action> waits_;
};

TEST_F(SchedulerTest, GrantsAFreeGpuAtOnce)
{
    gpu(0);
    client(1);
    s_.request(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G1"});
    EXPECT_EQ(s_.client(1)->phase, Phase::Holding);
    EXPECT_EQ(s_.gpus()[0].holders, std::vector<ClientId>{1});
}

TEST_F(SchedulerTest, FirstComeFirstServed)
{
    gpu(0);
    for (ClientId id : {1, 2, 3, 4})
        client(id);
    for (ClientId id : {3, 1, 4, 2})
        s_.request(id, gpu_bit(0), now_);
    EXPECT_EQ(actions(), (V{"G3", "C3"}));
    EXPECT_EQ(s_.queue(0), (std::vector<ClientId>{1, 4, 2}));
    for (ClientId expected : {1, 4, 2}) {
        const ClientId holder = s_.gpus()[0].holders.at(0);
        s_.release(holder, gpu_bit(0), now_);
        auto a = actions();
        ASSERT_FALSE(a.empty());
        EXPECT_EQ(a[0], "G" + std::to_string(expected));
    }
}

TEST_F(SchedulerTest, QuantumExpiryWithoutWaitersChangesNothing)
{
    gpu(0);
    client(1);
    s_.request(1, gpu_bit(0), now_);
    actions();
    advance(10min);
    EXPECT_TRUE(actions().empty());
    EXPECT_FALSE(s_.next_deadline());
    EXPECT_EQ(s_.client(1)->phase, Phase::Holding);
}

TEST_F(SchedulerTest, QuantumExpiryWithAWaiterSendsOneDrop)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_ + 1s);
    EXPECT_EQ(actions(), (V{"G1", "C1"}));
    EXPECT_EQ(s_.next_deadline(), now_ + 30s);
    advance(29s);
    EXPECT_TRUE(actions().empty());
    advance(1s);
    EXPECT_EQ(actions(), V{"D1"});
    advance(1s);
    EXPECT_TRUE(actions().empty()) << "the drop request is sent once";
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G2"});
}

TEST_F(SchedulerTest, AWaiterArrivingAfterTheQuantumGetsTheGpuAfterOneDrop)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    advance(5min);
    s_.request(2, gpu_bit(0), now_);
    EXPECT_EQ(actions(), (V{"G1", "C1", "D1"}));
}

TEST_F(SchedulerTest, EarlyReleaseHandsOverImmediately)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    advance(50ms);
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G2"});
    EXPECT_EQ(s_.client(1)->held_total, 50ms);
    EXPECT_EQ(s_.client(2)->waited_total, 50ms);
}

TEST_F(SchedulerTest, RevokesAHolderThatIgnoresTheDrop)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    advance(30s);
    EXPECT_EQ(actions(), V{"D1"});
    EXPECT_EQ(s_.next_deadline(), now_ + 10s);
    advance(9s);
    EXPECT_TRUE(actions().empty());
    advance(1s);
    EXPECT_EQ(actions(), (V{"R1", "G2"}));
    EXPECT_EQ(s_.client(1)->revocations, 1u);
    EXPECT_EQ(s_.client(1)->phase, Phase::Idle);
    // A late Released from the revoked client changes nothing.
    s_.release(1, gpu_bit(0), now_);
    EXPECT_TRUE(actions().empty());
    EXPECT_EQ(s_.gpus()[0].holders, std::vector<ClientId>{2});
}

TEST_F(SchedulerTest, DeathOfTheHolderReleasesAtOnce)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    s_.disconnect(1, now_);
    EXPECT_EQ(actions(), V{"G2"});
    EXPECT_EQ(s_.client(1), nullptr);
}

TEST_F(SchedulerTest, DeathOfAWaiterLeavesTheQueue)
{
    gpu(0);
    for (ClientId id : {1, 2, 3})
        client(id);
    for (ClientId id : {1, 2, 3})
        s_.request(id, gpu_bit(0), now_);
    actions();
    s_.disconnect(2, now_);
    EXPECT_EQ(s_.queue(0), std::vector<ClientId>{3});
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G3"});
}

TEST_F(SchedulerTest, AdminRevocation)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    EXPECT_FALSE(s_.revoke(2, now_)) << "2 only waits";
    EXPECT_TRUE(s_.revoke(1, now_));
    EXPECT_EQ(actions(), (V{"R1", "G2"}));
}

// Issue 16: a waiter is told who holds its GPU, its place and why, once,
// and again only when one of them changes.
TEST_F(SchedulerTest, WaitersAreToldHolderPlaceAndReason)
{
    gpu(0);
    for (ClientId id : {1, 2, 3})
        client(id);
    s_.request(1, gpu_bit(0), now_);
    EXPECT_TRUE(waits().empty()) << "a holder waits for nothing";
    advance(5s);
    s_.request(2, gpu_bit(0), now_);
    s_.request(3, gpu_bit(0), now_);
    EXPECT_EQ(waits(), (V{"2:1:1:2", "3:2:1:2"}));  // mode on
    const auto facts = s_.wait_facts(3, 0);
    ASSERT_TRUE(facts);
    EXPECT_EQ(facts->place, 2u);
    EXPECT_EQ(facts->holder, ClientId{1});
    EXPECT_EQ(facts->held_since, now_ - 5s);
    EXPECT_EQ(facts->quantum, 30s);
    EXPECT_FALSE(s_.wait_facts(1, 0)) << "1 holds";
    // Time passing and events that change nothing for them say nothing.
    advance(1s);
    s_.report_memory(1, 0, {1 * GiB, 0}, now_);
    EXPECT_TRUE(waits().empty());
    // The holder changes: 3 moves up and is told; 2 holds now.
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(waits(), V{"3:1:2:2"});
    // A new quantum is news for the waiter.
    s_.set_time_quantum(20s, now_);
    EXPECT_EQ(waits(), V{"3:1:2:2"});
    EXPECT_EQ(s_.wait_facts(3, 0)->quantum, 20s);
}

// A hand-over tells the first kNamedPlaces waiters of every change, and
// waiters further back only as they are queued and as they enter the named
// places (no holder named: the processes ahead are in the way), so that it
// sends at most kNamedPlaces Waiting messages however long the line (issue
// 46 item 3). The status view still has every exact place.
TEST_F(SchedulerTest, DeepWaitersAreToldOnlyAsTheyEnterTheNamedPlaces)
{
    gpu(0);
    constexpr ClientId kClients = 101;
    for (ClientId id = 1; id <= kClients; ++id)
        client(id);
    for (ClientId id = 1; id <= kClients; ++id)
        s_.request(id, gpu_bit(0), now_);
    const auto first = waits();
    ASSERT_EQ(first.size(), kClients - 1);  // each is told once as it queues
    EXPECT_EQ(first[0], "2:1:1:2");
    EXPECT_EQ(first[Scheduler::kNamedPlaces - 1], "9:8:1:2");
    EXPECT_EQ(first[Scheduler::kNamedPlaces], "10:9:0:2");  // no holder named
    // Hand-overs: 100 waiters, 8 named, each told its new place; of places
    // 9-100 only the one that becomes 8th; the holder queues again, last.
    for (int round = 0; round < 20; ++round) {
        const ClientId holder = s_.gpus()[0].holders.at(0);
        s_.release(holder, gpu_bit(0), now_);
        const auto told = waits();
        EXPECT_EQ(told.size(), Scheduler::kNamedPlaces) << round;
        for (const std::string& w : told)
            EXPECT_LE(std::stoul(w.substr(w.find(':') + 1)), Scheduler::kNamedPlaces) << w;
        s_.request(holder, gpu_bit(0), now_);  // back to the end of the line
        EXPECT_EQ(waits(), V{std::to_string(holder) + ":100:0:2"}) << round;
    }
    // A deep waiter's place as told is the one it had when told; the status
    // view computes each waiter's place now.
    const std::vector<ClientId> line = s_.queue(0);
    for (size_t i = 0; i < line.size(); ++i) {
        const auto facts = s_.wait_facts(line[i], 0);
        ASSERT_TRUE(facts.has_value());
        EXPECT_EQ(facts->place, i + 1);
        const uint32_t told = s_.client(line[i])->wait_sent.at(0).place;
        if (i < Scheduler::kNamedPlaces)
            EXPECT_EQ(told, i + 1);
        else
            EXPECT_GE(told, i + 1);  // one user: places only move up
    }
}

// Three users of two classes, 1000 waiters each: the order between users
// moves at every hand-over (the holder's user goes back), so most places
// beyond the named ones move, and the reason of none. Each event still
// tells at most 2 x kNamedPlaces waiters besides the one it queues.
TEST_F(SchedulerTest, AHandOverTellsABoundedNumberOfWaitersWhateverTheUsers)
{
    gpu(0);
    constexpr ClientId kClients = 3000;
    constexpr size_t kMostPerEvent = 2 * Scheduler::kNamedPlaces;
    for (ClientId id = 1; id <= kClients; ++id) {
        ClientInfo info{static_cast<int32_t>(id), 1000 + static_cast<uint32_t>(id % 3), "c"};
        info.priority = id % 2 == 0 ? Priority::Batch : Priority::Normal;
        ASSERT_TRUE(s_.connect(id, info, {0}, now_));
    }
    for (ClientId id = 1; id <= kClients; ++id) {
        now_ += 1ms;
        s_.request(id, gpu_bit(0), now_);
    }
    EXPECT_EQ(waits().size(), kClients - 1);
    size_t most = 0;
    size_t deep_moved = 0;  // deep waiters whose place moved untold
    for (int round = 0; round < 60; ++round) {
        const ClientId holder = s_.gpus()[0].holders.at(0);
        now_ += 100ms;
        s_.release(holder, gpu_bit(0), now_);
        const size_t released = waits().size();
        EXPECT_LE(released, kMostPerEvent) << round;
        now_ += 100ms;
        s_.request(holder, gpu_bit(0), now_);
        const size_t requested = waits().size();
        EXPECT_LE(requested, kMostPerEvent + 1) << round;  // + the one queued
        most = std::max(most, released + requested);
        for (ClientId id : s_.queue(0)) {
            const uint32_t told = s_.client(id)->wait_sent.at(0).place;
            deep_moved += told > Scheduler::kNamedPlaces && told != s_.wait_facts(id, 0)->place;
        }
    }
    EXPECT_LE(most, 2 * kMostPerEvent + 1);
    EXPECT_GT(deep_moved, 1000u);  // the order did move deep in the line
}

// A change of the GPU's own reason (here its mode) is news for every waiter,
// deep ones too.
TEST_F(SchedulerTest, ANewReasonIsToldToEveryWaiter)
{
    auto_clients(16 * GiB, 30, 10 * GiB);  // one at a time fits: oversubscribed
    for (ClientId id = 1; id <= 30; ++id)
        s_.request(id, gpu_bit(0), now_);
    for (const std::string& w : waits())
        EXPECT_EQ(w.back(), '1') << w;  // Oversubscribed
    s_.set_mode(Mode::On, now_);
    std::set<std::string> told;
    for (const std::string& w : waits()) {
        EXPECT_EQ(w.back(), '2') << w;  // ModeOn
        told.insert(w.substr(0, w.find(':')));
    }
    const std::vector<ClientId> line = s_.queue(0);
    ASSERT_GT(line.size(), Scheduler::kNamedPlaces + 10);
    for (ClientId id : line)
        EXPECT_EQ(told.count(std::to_string(id)), 1u) << id;
}

TEST_F(SchedulerTest, OversubscriptionIsTheReasonInAutoMode)
{
    gpu(0, 10 * GiB);
    s_.set_mode(Mode::Auto, now_);
    for (ClientId id : {1, 2})
        client(id);
    s_.report_memory(1, 0, {6 * GiB, 0}, now_);
    s_.report_memory(2, 0, {6 * GiB, 0}, now_);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    EXPECT_EQ(waits(), V{"2:1:1:1"});
    // Switching the mode on changes the reason.
    s_.set_mode(Mode::On, now_);
    EXPECT_EQ(waits(), V{"2:1:1:2"});
}

TEST_F(SchedulerTest, RevocationsAndDropsCarryTheirCause)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    advance(30s);
    ASSERT_EQ(actions(), V{"D1"});
    EXPECT_FALSE(last(ActionKind::Drop)->turns_begin) << "the quantum ran out";
    advance(10s);
    ASSERT_EQ(actions(), (V{"R1", "G2"}));
    EXPECT_EQ(last(ActionKind::Revoke)->revoke_reason, RevokeReason::GraceExpired);
    EXPECT_TRUE(s_.revoke(2, now_));
    ASSERT_EQ(actions(), V{"R2"});
    EXPECT_EQ(last(ActionKind::Revoke)->revoke_reason, RevokeReason::Admin);
}

TEST_F(SchedulerTest, ADropWhenTurnsBeginSaysSo)
{
    gpu(0);
    s_.set_mode(Mode::Off, now_);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    advance(1s);
    s_.request(2, gpu_bit(0), now_);
    ASSERT_EQ(actions(), (V{"G1", "G2"}));
    s_.set_mode(Mode::On, now_);
    ASSERT_EQ(actions(), V{"D2"});
    EXPECT_TRUE(last(ActionKind::Drop)->turns_begin);
}

TEST_F(SchedulerTest, ChangingTheQuantumAppliesToTheRunningOne)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    advance(10s);
    s_.set_time_quantum(5s, now_);
    EXPECT_EQ(actions(), V{"D1"}) << "already past the new quantum";
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G2"});
    s_.set_time_quantum(1min, now_);
    s_.request(1, gpu_bit(0), now_);
    actions();
    EXPECT_EQ(s_.next_deadline(), now_ + 1min);
}

// Switching must stay cheap next to the quantum: when a client reports that
// its swap-in took 4 s, a 30 s quantum becomes 10 x 4 = 40 s.
TEST_F(SchedulerTest, QuantumGrowsWithTheMeasuredSwapIn)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    EXPECT_EQ(s_.next_deadline(), now_ + 30s);
    SwapStats st;
    st.swap_ins = 1;
    st.swap_in_time = 4s;
    st.bytes_prefetched = 8 * GiB;
    s_.report_swaps(1, 0, st, now_);
    EXPECT_EQ(s_.gpus()[0].last_swap_in, 4s);
    EXPECT_EQ(s_.next_deadline(), now_ + 40s);
    advance(35s);
    EXPECT_TRUE(actions().empty());
    advance(5s);
    EXPECT_EQ(actions(), V{"D1"});
    // The latest swap counts, not the average: a cheap one brings the
    // configured quantum back.
    st.swap_ins = 2;
    st.swap_in_time = 4s + 100ms;
    s_.report_swaps(1, 0, st, now_);
    EXPECT_EQ(s_.gpus()[0].last_swap_in, 100ms);
}

// Issue 47: under a short quantum one report no longer takes the holder to
// the 60 s ceiling (200 times 0.3 s): four times the admin's quantum at most.
TEST_F(SchedulerTest, OwnSwapReportsStretchTheQuantumAtMostFourfold)
{
    gpu(0);
    client(1);
    client(2);
    s_.set_time_quantum(300ms, now_);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    EXPECT_EQ(s_.next_deadline(), now_ + 300ms);
    SwapStats st;
    st.swap_ins = 1;
    st.swap_in_time = 2s;  // ten times that would be 20 s
    s_.report_swaps(1, 0, st, now_);
    EXPECT_EQ(s_.next_deadline(), now_ + 1200ms);
    advance(1200ms);
    EXPECT_EQ(actions(), V{"D1"});
}

TEST_F(SchedulerTest, ModeOffLetsEveryoneRunAndOnSerializesAgain)
{
    gpu(0);
    for (ClientId id : {1, 2, 3})
        client(id);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    s_.request(3, gpu_bit(0), now_);
    actions();
    s_.set_mode(Mode::Off, now_);
    EXPECT_EQ(actions(), (V{"G2", "G3"})) << "waiters run at once";
    EXPECT_FALSE(s_.serializing(0));
    EXPECT_FALSE(s_.next_deadline()) << "no quanta when not serializing";

    advance(1s);
    s_.set_mode(Mode::On, now_);
    // The first granted keeps running, told again that it takes turns now;
    // the others must let go.
    EXPECT_EQ(actions(), (V{"D2", "D3", "C1"}));
    s_.release(2, gpu_bit(0), now_);
    s_.release(3, gpu_bit(0), now_);
    EXPECT_TRUE(actions().empty());
    EXPECT_EQ(s_.gpus()[0].holders, std::vector<ClientId>{1});
}

TEST_F(SchedulerTest, ModeSwitchWhileHoldingAndWaitingKeepsOrder)
{
    gpu(0);
    for (ClientId id : {1, 2})
        client(id);
    s_.set_mode(Mode::Off, now_);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    EXPECT_EQ(actions(), (V{"G1", "G2"}));
    s_.set_mode(Mode::On, now_);
    EXPECT_EQ(actions(), V{"D2"});
    // 2 ignores it: revoked after the grace, 1 keeps the GPU.
    advance(10s);
    EXPECT_EQ(actions(), V{"R2"});
    EXPECT_EQ(s_.gpus()[0].holders, std::vector<ClientId>{1});
}

TEST_F(SchedulerTest, AutoSerializesOnlyWhileMemoryExceedsCapacity)
{
    s_.set_mode(Mode::Auto, now_);
    gpu(0, 80 * GiB);
    client(1);
    client(2);
    host_confirms(2);
    s_.report_memory(1, 0, {30 * GiB, 0}, now_);
    s_.report_memory(2, 0, {30 * GiB, 0}, now_);
    EXPECT_FALSE(s_.serializing(0));
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    // 2's bursts are not known yet: it joins 1 once 1 has started (its
    // memory did not grow for policy::kStartupSettle), and once 2 has
    // started too, both are told, so that they hand over at the end of
    // their bursts from now on.
    EXPECT_EQ(actions(), V{"G1"});
    advance(policy::kStartupSettle);
    EXPECT_EQ(actions(), V{"G2"}) << "60 GiB fit in 80: both run";
    advance(policy::kStartupSettle);
    EXPECT_EQ(actions(), (V{"C1", "C2"}));

    advance(1s);
    s_.report_memory(2, 0, {40 * GiB, 10 * GiB}, now_);  // 80 GiB: still fits
    EXPECT_FALSE(s_.serializing(0));
    EXPECT_TRUE(actions().empty());
    s_.report_memory(2, 0, {45 * GiB, 10 * GiB}, now_);  // 85 GiB: over
    EXPECT_TRUE(s_.serializing(0));
    // 2 must let go; 1, told of 2 while the GPU was shared, is told again:
    // it holds the GPU alone now (its allocations may wait for room).
    EXPECT_EQ(actions(), (V{"D2", "C1"}));
    ASSERT_NE(last(ActionKind::Contended), nullptr);
    EXPECT_TRUE(last(ActionKind::Contended)->exclusive);
    EXPECT_TRUE(last(ActionKind::Contended)->oversubscribed);
    s_.release(2, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    // 2 now waits for 1, which knows already. Nobody waited when 2 was
    // dropped, so it kept everything: 1's 30 GiB and 2's 10 GiB pinned
    // leave 40 GiB of its 45 managed.
    EXPECT_EQ(actions(), V{"S2"});
    ASSERT_NE(last(ActionKind::Shrink), nullptr);
    EXPECT_EQ(last(ActionKind::Shrink)->keep, 40 * GiB);
    EXPECT_EQ(s_.queue(0), std::vector<ClientId>{2});

    s_.report_memory(2, 0, {10 * GiB, 0}, now_);  // back under capacity
    EXPECT_FALSE(s_.serializing(0));
    EXPECT_EQ(actions(), V{"G2"});
}

// Auto mode takes an oversubscribed GPU in turns of groups: processes whose
// memory fits together run together, the others wait their turn.
TEST_F(SchedulerTest, AutoTurnsAreTakenByGroupsWhoseMemoryFits)
{
    auto_clients(80 * GiB, 3, 33 * GiB);
    ASSERT_TRUE(s_.serializing(0));
    s_.request(1, gpu_bit(0), now_);
    const auto first = decisions();
    ASSERT_EQ(first.size(), 1u);
    EXPECT_TRUE(first[0].exclusive);  // alone on the GPU
    advance(2s);
    s_.request(2, gpu_bit(0), now_);
    const auto second = decisions();
    ASSERT_EQ(second.size(), 1u);
    EXPECT_EQ(second[0].client, 2u);
    EXPECT_EQ(second[0].kind, ActionKind::Grant);
    EXPECT_FALSE(second[0].exclusive);  // beside 1
    advance(2s);
    s_.request(3, gpu_bit(0), now_);  // 99 GiB: 3 waits, the group is told
    EXPECT_EQ(actions(), (V{"C1", "C2"}));
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G3"});  // beside 2
    EXPECT_EQ(s_.gpus()[0].holders.size(), 2u);
}

TEST_F(SchedulerTest, AutoGroupsNeverFormInModeOn)
{
    gpu(0, 80 * GiB);
    for (ClientId id : {1, 2}) {
        client(id);
        s_.report_memory(id, 0, {10 * GiB, 0}, now_);
        s_.request(id, gpu_bit(0), now_);
    }
    advance(2s);
    EXPECT_EQ(actions(), (V{"G1", "C1"}));
}

// A newcomer joins a group only once its holders have started: what one
// still starting will use is not known yet.
TEST_F(SchedulerTest, AWaiterJoinsAGroupOnceItsHoldersHaveStarted)
{
    auto_clients(80 * GiB, 3, 30 * GiB);
    s_.request(3, gpu_bit(0), now_);  // 3 has run before
    advance(2s);
    s_.release(3, gpu_bit(0), now_);
    s_.report_memory(3, 0, {30 * GiB, 0}, now_);
    (void)actions();
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    s_.request(3, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G1"});
    advance(100ms);
    EXPECT_EQ(actions(), V{});
    advance(policy::kStartupSettle);
    // 1 started: it is told that 3 waits, and 2 joins it. 3 joins nobody
    // while 2 starts, so a hand-over by 1 cannot meet a start.
    EXPECT_EQ(actions(), (V{"C1", "G2"}));
    advance(policy::kStartupSettle);
    EXPECT_EQ(actions(), V{"C2"});
}

// Pinned memory the host does not confirm counts for its sender's own fit
// (issue 47): with it, a waiter does not join a group it would not fit.
class PinnedFitTest : public SchedulerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(PinnedFitTest, UnconfirmedPinnedMemoryCountsForItsSendersOwnFit)
{
    const bool pins = GetParam();
    auto_clients(80 * GiB, 3, 30 * GiB);  // 90 GiB: group turns
    s_.report_memory(2, 0, {30 * GiB, pins ? 25 * GiB : 0}, now_);
    s_.request(3, gpu_bit(0), now_);  // 3 has run before
    advance(2s);
    s_.release(3, gpu_bit(0), now_);
    (void)actions();
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G1"});
    advance(policy::kStartupSettle);
    // 30 + 30 fit in 80; with 2's 25 GiB pinned besides, they do not.
    EXPECT_EQ(actions(), pins ? V{"C1"} : (V{"C1", "G2"}));
    EXPECT_EQ(s_.requested_memory(0), 90 * GiB) << "others do not count it";
}
INSTANTIATE_TEST_SUITE_P(Pins, PinnedFitTest, ::testing::Bool());

// Nor does it join holders that wait for room (a Shrink round less than
// kGrowthRound ago): it would wait for the same room.
TEST_F(SchedulerTest, AWaiterJoinsNoGroupThatWaitsForRoom)
{
    auto_clients(80 * GiB, 3, 20 * GiB);
    s_.report_memory(3, 0, {30 * GiB, 0}, now_);
    s_.request(3, gpu_bit(0), now_);
    s_.release(3, gpu_bit(0), now_);  // 70 GiB fit: 3 keeps its 30
    s_.request(1, gpu_bit(0), now_);
    advance(2s);                                  // 1 has started
    s_.report_memory(1, 0, {55 * GiB, 0}, now_);  // 105 GiB: turns
    EXPECT_EQ(actions(), (V{"G3", "G1", "S3"}));
    s_.request(2, gpu_bit(0), now_);  // 55 + 20 would fit beside 1
    EXPECT_EQ(actions(), V{"C1"});
    advance(Room::kGrowthRound - 1ms);
    EXPECT_EQ(actions(), V{});
    advance(1ms);
    EXPECT_EQ(actions(), (V{"G2", "S3"}));
    EXPECT_EQ(s_.client(3)->kept.at(0), 5 * GiB);
}

// Quanta that end together in group turns: only as many holders let go as
// the first in line needs to fit beside those that stay; the others go on
// (a group whose quanta ended together all swapped out, then came back for
// the last of their work beside the one granted). A later waiter that fits
// beside nobody ends the quantum of the one that stayed.
TEST_F(SchedulerTest, QuantaEndingInAGroupAskOnlyAsManyToLetGoAsTheFirstInLineNeeds)
{
    auto_clients(80 * GiB, 4, 30 * GiB);  // 120 GiB: group turns
    s_.set_time_quantum(20s, now_);
    s_.request(1, gpu_bit(0), now_);
    advance(2s);
    s_.request(2, gpu_bit(0), now_);
    advance(2s);
    EXPECT_EQ(actions(), (V{"G1", "G2"}));
    s_.request(3, gpu_bit(0), now_);  // 30 GiB: fits beside one of them
    EXPECT_EQ(actions(), (V{"C1", "C2"}));
    advance(17s);  // 1's quantum ended
    EXPECT_EQ(actions(), V{"D1"});
    advance(2s);  // and 2's: 3 fits beside 2, which stays
    EXPECT_EQ(actions(), V{});
    EXPECT_FALSE(s_.client(2)->drop_sent);
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), (V{"G3"}));  // beside 2
    advance(1min);
    EXPECT_EQ(actions(), V{}) << "nobody waits whom 2's letting go would help";
    s_.report_memory(4, 0, {60 * GiB, 0}, now_);
    s_.request(4, gpu_bit(0), now_);  // fits beside neither: both quanta ended long ago
    EXPECT_EQ(actions(), (V{"C3", "D2", "D3"}));
}
// With nobody leaving, a holder's quantum runs in group turns even where
// the first in line would fit beside it: the group may not take it yet
// (here its holder is still starting), and the waiter must not wait on that.
TEST_F(SchedulerTest, AGroupHoldersQuantumRunsWhereNobodyLeaves)
{
    auto_clients(80 * GiB, 3, 30 * GiB);  // 90 GiB: group turns
    s_.set_time_quantum(200ms, now_);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);  // fits beside 1, which has not started
    s_.request(3, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G1"});
    ASSERT_LT(200ms, policy::kStartupSettle);
    advance(200ms);
    EXPECT_EQ(actions(), V{"D1"});
}

// Memory that grows past what the group fits: the one granted last lets go.
TEST_F(SchedulerTest, AGroupThatNoLongerFitsAsksTheLatestToLetGo)
{
    auto_clients(80 * GiB, 3, 30 * GiB);
    s_.request(1, gpu_bit(0), now_);
    advance(2s);
    s_.request(2, gpu_bit(0), now_);
    advance(2s);
    s_.request(3, gpu_bit(0), now_);
    (void)actions();
    s_.report_memory(1, 0, {55 * GiB, 0}, now_);  // 85 GiB with 2's 30
    EXPECT_EQ(actions(), V{"D2"});
    EXPECT_TRUE(s_.client(2)->drop_sent);
    EXPECT_FALSE(s_.client(1)->drop_sent);
}

// A hand-over in group turns: the first in line is granted alone, and the
// next joins it at once where it fits beside it and has started...
TEST_F(SchedulerTest, TheNextInLineJoinsTheOneGrantedAtAHandOver)
{
    auto_clients(80 * GiB, 3, 30 * GiB);
    s_.request(2, gpu_bit(0), now_);  // 2 has run before
    advance(2s);
    s_.release(2, gpu_bit(0), now_);
    s_.report_memory(1, 0, {60 * GiB, 0}, now_);
    s_.request(1, gpu_bit(0), now_);
    advance(2s);
    s_.request(2, gpu_bit(0), now_);  // neither fits beside 1
    s_.request(3, gpu_bit(0), now_);
    (void)actions();
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), (V{"G2", "G3", "S1"}));  // 1 leaves room for both
}

// ...or once the one granted has started.
TEST_F(SchedulerTest, TheNextInLineJoinsTheOneGrantedAtAHandOverOnceItHasStarted)
{
    auto_clients(80 * GiB, 3, 30 * GiB);
    s_.report_memory(1, 0, {60 * GiB, 0}, now_);
    s_.request(1, gpu_bit(0), now_);
    advance(2s);
    s_.request(2, gpu_bit(0), now_);  // neither fits beside 1
    s_.request(3, gpu_bit(0), now_);
    (void)actions();
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G2"});  // 2 starts
    ASSERT_TRUE(s_.next_deadline());
    EXPECT_LE(*s_.next_deadline(), now_ + policy::kStartupWindow);
    advance(policy::kStartupWindow);
    EXPECT_EQ(actions(), (V{"C2", "G3", "S1"}));
}

// A client that leaves takes its pinned memory with it: in group turns the
// first in line may fit beside the holders now.
TEST_F(SchedulerTest, AWaiterJoinsAGroupWhenAnotherClientsPinnedMemoryLeaves)
{
    s_.set_mode(Mode::Auto, now_);
    gpu(0, 80 * GiB);
    ASSERT_TRUE(s_.connect(9, {9, 0, "root"}, {0}));  // root: its pinning counts at once
    s_.report_memory(9, 0, {0, 20 * GiB}, now_);
    client(1);
    client(2);
    client(3);
    s_.report_memory(1, 0, {40 * GiB, 0}, now_);
    s_.report_memory(2, 0, {30 * GiB, 0}, now_);
    s_.report_memory(3, 0, {15 * GiB, 0}, now_);  // idle: keeps it in group turns
    s_.request(1, gpu_bit(0), now_);
    advance(2s);
    s_.request(2, gpu_bit(0), now_);  // 20 pinned + 40 + 30: does not fit
    (void)actions();
    s_.disconnect(9, now_);
    ASSERT_EQ(s_.turns(0), Turns::Groups);  // 85 GiB
    EXPECT_EQ(actions(), V{"G2"});
}

// A capacity set at run time counts like a memory report: a group that no
// longer fits below the new capacity asks the latest to let go...
TEST_F(SchedulerTest, AGroupThatNoLongerFitsTheNewCapacityAsksTheLatestToLetGo)
{
    auto_clients(80 * GiB, 3, 30 * GiB);
    s_.request(1, gpu_bit(0), now_);
    advance(2s);
    s_.request(2, gpu_bit(0), now_);
    advance(2s);
    s_.request(3, gpu_bit(0), now_);
    ASSERT_EQ(s_.gpus()[0].holders.size(), 2u);
    (void)actions();
    s_.set_capacity(0, 50 * GiB, now_);  // still group turns; 1 and 2 need 60 GiB
    ASSERT_EQ(s_.turns(0), Turns::Groups);
    EXPECT_EQ(actions(), V{"D2"});
}

// ...and the first in line joins a group it now fits beside.
TEST_F(SchedulerTest, AWaiterJoinsAGroupWhenTheCapacityGrows)
{
    auto_clients(50 * GiB, 3, 30 * GiB);
    s_.request(1, gpu_bit(0), now_);
    advance(2s);
    s_.request(2, gpu_bit(0), now_);
    EXPECT_EQ(actions(), (V{"G1", "C1"}));
    s_.set_capacity(0, 80 * GiB, now_);  // still group turns: 90 GiB
    ASSERT_EQ(s_.turns(0), Turns::Groups);
    EXPECT_EQ(actions(), V{"G2"});
}

// On an oversubscribed GPU the holder is told how much of its managed memory
// may stay: what fits beside the next waiter and what others keep there.
TEST_F(SchedulerTest, DropTellsHowMuchMayStayBesideTheNextHolder)
{
    s_.set_mode(Mode::Auto, now_);
    gpu(0, 12 * GiB);
    client(1);
    client(2);
    client(3);
    host_confirms(2);
    s_.report_memory(1, 0, {8 * GiB, 0}, now_);
    s_.report_memory(2, 0, {6 * GiB, 1 * GiB}, now_);  // 7 GiB, of which 1 pinned
    s_.report_memory(3, 0, {11 * GiB / 2, 0}, now_);   // too much to join 2 (group turns)
    ASSERT_TRUE(s_.serializing(0));
    const auto keep_of = [&](ActionKind kind) {
        for (const Action& a : s_.take_actions())
            if (a.kind == kind)
                return a.keep;
        return uint64_t{0};
    };
    // Each is granted for the first time here; once it has started
    // (kStartupSettle), it is told that others wait.
    s_.request(1, gpu_bit(0), now_);
    (void)s_.take_actions();
    advance(1s);
    s_.request(2, gpu_bit(0), now_);
    // 12 GiB less the waiter's 7 GiB (its pinned part included): 5 GiB of 8.
    EXPECT_EQ(keep_of(ActionKind::Contended), 5 * GiB);
    advance(31s);
    EXPECT_EQ(keep_of(ActionKind::Drop), 5 * GiB);
    s_.release(1, gpu_bit(0), now_);
    (void)s_.take_actions();  // G2
    advance(1s);

    // Now 1 keeps 5 GiB on the GPU; 3 waits behind 2 and needs 5.5 GiB:
    // 2 may keep 12 - 5 (1's) - 5.5 (3's) - 1 (its own pinned) = 0.5 GiB.
    s_.request(3, gpu_bit(0), now_);
    EXPECT_EQ(keep_of(ActionKind::Contended), GiB / 2);
    s_.release(2, gpu_bit(0), now_);
    (void)s_.take_actions();  // G3
    advance(1s);

    // 3 holds and 1 comes back: 1's 8 GiB, and 2's 0.5 GiB kept and 1 GiB
    // pinned, leave 2.5 GiB of 3's 5.5.
    s_.request(1, gpu_bit(0), now_);
    EXPECT_EQ(keep_of(ActionKind::Contended), 5 * GiB / 2);
}

// The room a Drop leaves is for the waiter that goes next by the order
// (class, then the user's held time, then arrival), not for the first to
// arrive (issue 46: it was computed for the first by arrival).
TEST_F(SchedulerTest, DropLeavesRoomForTheWaiterThatGoesNext)
{
    s_.set_mode(Mode::Auto, now_);
    gpu(0, 12 * GiB);
    client(1);
    ClientInfo big{2, 1001, "big"};
    big.priority = nvshare::proto::Priority::Batch;
    ClientInfo small{3, 1002, "small"};
    small.priority = nvshare::proto::Priority::Interactive;
    ASSERT_TRUE(s_.connect(2, big, {0}));
    ASSERT_TRUE(s_.connect(3, small, {0}));
    s_.report_memory(1, 0, {8 * GiB, 0}, now_);
    s_.report_memory(2, 0, {10 * GiB, 0}, now_);
    s_.report_memory(3, 0, {5 * GiB, 0}, now_);  // does not fit beside 1's 8
    ASSERT_TRUE(s_.serializing(0));
    s_.request(1, gpu_bit(0), now_);
    (void)s_.take_actions();
    advance(1s);
    s_.request(2, gpu_bit(0), now_);  // first to arrive
    advance(1ms);
    s_.request(3, gpu_bit(0), now_);  // goes next
    ASSERT_EQ(s_.queue(0).front(), 3u);
    uint64_t keep = 0;
    for (const Action& a : s_.take_actions())
        if (a.kind == ActionKind::Drop || a.kind == ActionKind::Contended)
            keep = a.keep;
    // 12 GiB less 3's 5 GiB: 1 may keep 7 GiB (for 2, it was 2 GiB).
    EXPECT_EQ(keep, 7 * GiB);
}

// Two users of one class: the one whose user has held the GPU less goes
// next, and the keep leaves room for it, not for the first to arrive.
TEST_F(SchedulerTest, DropLeavesRoomForTheUserThatGoesNext)
{
    s_.set_mode(Mode::Auto, now_);
    gpu(0, 12 * GiB);
    client(1);
    ASSERT_TRUE(s_.connect(2, {2, 1001, "big"}, {0}));
    ASSERT_TRUE(s_.connect(3, {3, 1002, "small"}, {0}));
    // User 1001 has held the GPU (2 left nothing there).
    s_.request(2, gpu_bit(0), now_);
    advance(20s);
    s_.release(2, gpu_bit(0), now_);
    s_.report_memory(1, 0, {8 * GiB, 0}, now_);
    s_.report_memory(2, 0, {10 * GiB, 0}, now_);
    s_.report_memory(3, 0, {5 * GiB, 0}, now_);  // does not fit beside 1's 8
    ASSERT_TRUE(s_.serializing(0));
    s_.request(1, gpu_bit(0), now_);
    advance(1s);
    s_.request(2, gpu_bit(0), now_);  // first to arrive
    advance(1ms);
    s_.request(3, gpu_bit(0), now_);  // goes next: its user has held less
    (void)s_.take_actions();          // 1 was told of 2 when it came
    advance(30s);                     // 1's quantum ends
    ASSERT_EQ(s_.queue(0).front(), 3u);
    std::optional<uint64_t> keep;
    for (const Action& a : s_.take_actions())
        if (a.kind == ActionKind::Drop)
            keep = a.keep;
    // 12 GiB less 3's 5 GiB: 1 may keep 7 GiB (for 2, it was 2 GiB).
    EXPECT_EQ(keep, 7 * GiB);
}

// Granted while others wait: the Grant itself says what may stay.
TEST_F(SchedulerTest, ContendedGrantCarriesTheKeep)
{
    auto_clients(12 * GiB, 3, 8 * GiB);
    // 2 has run before (a process still starting is told later).
    s_.request(2, gpu_bit(0), now_);
    advance(1s);
    s_.release(2, gpu_bit(0), now_);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    s_.request(3, gpu_bit(0), now_);
    advance(1s);  // 1 has started and is told
    (void)s_.take_actions();
    s_.release(1, gpu_bit(0), now_);  // 1 left everything it was allowed: 4 GiB
    const auto acts = decisions();
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_EQ(acts[0].kind, ActionKind::Grant);
    EXPECT_TRUE(acts[0].contended);
    // 12 GiB less 3's 8 GiB and the 4 GiB 1 kept: nothing of 2's may stay.
    EXPECT_EQ(acts[0].keep, 0u);
}

// A holder that grows asks clients that do not hold the GPU to leave room:
// those waiting for nothing give first, the next waiter keeps its memory.
TEST_F(SchedulerTest, ShrinkAsksIdleClientsFirstForTheRoomAHolderNeeds)
{
    s_.set_mode(Mode::On, now_);
    gpu(0, 20 * GiB);
    for (ClientId id : {1, 2, 3}) {
        client(id);
        s_.report_memory(id, 0, {6 * GiB, 0}, now_);  // 18 GiB of 20: fits
    }
    for (ClientId id : {1, 2}) {
        s_.request(id, gpu_bit(0), now_);
        s_.release(id, gpu_bit(0), now_);  // memory fits: all of it stays
    }
    s_.request(3, gpu_bit(0), now_);
    s_.request(1, gpu_bit(0), now_);  // waits; 2 waits for nothing
    EXPECT_EQ(actions(), (V{"G1", "G2", "G3", "C3"}));

    s_.report_memory(3, 0, {12 * GiB, 0}, now_);  // 24 GiB of 20
    // 3 uses 12 GiB: 8 GiB are left, 6 for 1 (next), 2 for 2.
    EXPECT_EQ(actions(), V{"S2"});
    ASSERT_NE(last(ActionKind::Shrink), nullptr);
    EXPECT_EQ(last(ActionKind::Shrink)->keep, 2 * GiB);
    EXPECT_TRUE(last(ActionKind::Shrink)->oversubscribed);

    s_.report_memory(3, 0, {12 * GiB, 0}, now_);  // the same: asked once
    EXPECT_TRUE(actions().empty());
    s_.report_memory(3, 0, {16 * GiB, 0}, now_);  // 4 GiB left: 2 gives all, 1 gives 2
    EXPECT_EQ(actions(), (V{"S1", "S2"}));
    EXPECT_EQ(s_.client(1)->kept.at(0), 4 * GiB);
    EXPECT_EQ(s_.client(2)->kept.at(0), 0u);
}

// A holder that grows a block at a time, each waiting for its room, gets
// it in rounds that double while they follow each other, not a block per
// round: 1, 2, 4 and 8 GiB for 12 GiB of growth, and the fourth leaves room
// for what comes next. Growth that comes faster than a round is answered,
// or long after the last, asks what is lacking only.
TEST_F(SchedulerTest, ShrinkRoundsDoubleWhileTheHolderWaitsForEach)
{
    s_.set_mode(Mode::On, now_);
    gpu(0, 40 * GiB);
    for (ClientId id : {1, 2}) {
        client(id);
        s_.report_memory(id, 0, {20 * GiB, 0}, now_);
    }
    s_.request(1, gpu_bit(0), now_);
    s_.release(1, gpu_bit(0), now_);  // fits: all 20 GiB stay
    s_.request(2, gpu_bit(0), now_);
    (void)actions();
    std::vector<uint64_t> kept;
    uint64_t size = 20 * GiB;
    const auto grow = [&](Duration after) {
        advance(after);
        size += GiB;
        s_.report_memory(2, 0, {size, 0}, now_);
        if (!actions().empty())
            kept.push_back(s_.client(1)->kept.at(0) / GiB);
    };
    for (int i = 0; i < 12; ++i)
        grow(Room::kAnsweredRound);
    EXPECT_EQ(kept, (std::vector<uint64_t>{19, 17, 13, 5}));

    kept.clear();
    advance(Room::kGrowthRound);  // 32 GiB: 1 keeps 5 of the 8 left
    for (int i = 0; i < 6; ++i)   // the room runs out at 36 GiB
        grow(Room::kAnsweredRound / 2);
    EXPECT_EQ(kept, (std::vector<uint64_t>{4, 3, 2}));
}

// A holder never told that the GPU is oversubscribed moved nothing when it
// let go: the next holder's room is asked of it.
TEST_F(SchedulerTest, AReleaseNeverToldOfOversubscriptionKeptEverything)
{
    s_.set_mode(Mode::Auto, now_);
    gpu(0, 80 * GiB);
    client(1);
    client(2);
    s_.report_memory(1, 0, {50 * GiB, 0}, now_);
    s_.request(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G1"});
    s_.report_memory(2, 0, {40 * GiB, 0}, now_);  // 90 GiB: 2 waits for nothing yet
    EXPECT_TRUE(actions().empty());
    s_.release(1, gpu_bit(0), now_);
    EXPECT_EQ(s_.client(1)->kept.at(0), 50 * GiB);
    s_.request(2, gpu_bit(0), now_);
    EXPECT_EQ(actions(), (V{"G2", "S1"}));
    EXPECT_EQ(last(ActionKind::Shrink)->keep, 40 * GiB);
}

TEST_F(SchedulerTest, KeepsEverythingWhereMemoryFits)
{
    s_.set_mode(Mode::On, now_);
    gpu(0, 80 * GiB);
    client(1);
    client(2);
    s_.report_memory(1, 0, {8 * GiB, 0}, now_);
    s_.report_memory(2, 0, {8 * GiB, 0}, now_);
    s_.request(1, gpu_bit(0), now_);
    (void)s_.take_actions();
    s_.request(2, gpu_bit(0), now_);
    const auto acts = decisions();
    ASSERT_EQ(acts.size(), 1u);
    EXPECT_EQ(acts[0].kind, ActionKind::Contended);
    EXPECT_EQ(acts[0].keep, UINT64_MAX);
}

TEST_F(SchedulerTest, CapacityIsConfigurableAndAppliesToAuto)
{
    s_.set_mode(Mode::Auto, now_);
    s_.set_capacity_override("GPU-0", 10 * GiB);
    gpu(0, 80 * GiB);
    EXPECT_EQ(s_.gpus()[0].capacity, 10 * GiB);
    client(1);
    s_.report_memory(1, 0, {12 * GiB, 0}, now_);
    EXPECT_TRUE(s_.serializing(0));
    s_.set_capacity(0, 20 * GiB, now_);
    EXPECT_FALSE(s_.serializing(0));
}

TEST_F(SchedulerTest, DefaultCapacityAppliesToNewGpus)
{
    s_.set_default_capacity(4 * GiB);
    gpu(0, 80 * GiB);
    EXPECT_EQ(s_.gpus()[0].capacity, 4 * GiB);
}

TEST_F(SchedulerTest, GpusAreIndependent)
{
    gpu(0);
    gpu(1);
    client(1, {0});
    client(2, {1});
    client(3, {0});
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(1), now_);
    s_.request(3, gpu_bit(0), now_);
    EXPECT_EQ(actions(), (V{"G1", "G2", "C1"}));
    advance(30s);
    EXPECT_EQ(actions(), V{"D1"}) << "2 has no contender on GPU 1";
}

TEST_F(SchedulerTest, MultiGpuRequestsNeverDeadlock)
{
    gpu(0);
    gpu(1);
    client(1, {0, 1});
    client(2, {0, 1});
    client(3, {1});
    s_.request(3, gpu_bit(1), now_);
    s_.request(1, gpu_bit(0) | gpu_bit(1), now_);
    s_.request(2, gpu_bit(0), now_);
    // 1 waits for GPU 1 and reserves GPU 0, so 2 may not overtake it there.
    EXPECT_EQ(actions(), (V{"G3", "C3"}));
    EXPECT_EQ(s_.gpus()[0].holders.size(), 0u);
    s_.release(3, gpu_bit(1), now_);
    EXPECT_EQ(actions(), V{"G1"});
    EXPECT_TRUE(grant_contended_[1]) << "2 already waits for GPU 0: the Grant says so";
    EXPECT_EQ(s_.gpus()[0].holders, std::vector<ClientId>{1});
    EXPECT_EQ(s_.gpus()[1].holders, std::vector<ClientId>{1});
    s_.release(1, gpu_bit(0) | gpu_bit(1), now_);
    EXPECT_EQ(actions(), V{"G2"});
}

TEST_F(SchedulerTest, RequestingMoreWhileHoldingGivesUpWhatIsHeld)
{
    gpu(0);
    gpu(1);
    client(1, {0, 1});
    client(2, {1});
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(1), now_);
    actions();
    s_.request(1, gpu_bit(0) | gpu_bit(1), now_);  // no hold-and-wait
    EXPECT_EQ(s_.client(1)->phase, Phase::Waiting);
    EXPECT_TRUE(s_.gpus()[0].holders.empty());
    EXPECT_EQ(actions(), V{"C2"});
}

TEST_F(SchedulerTest, RequestForWhatIsHeldIsAnsweredAgain)
{
    gpu(0);
    client(1);
    s_.request(1, gpu_bit(0), now_);
    actions();
    s_.request(1, gpu_bit(0), now_);
    EXPECT_EQ(actions(), V{"G1"});
    EXPECT_EQ(s_.client(1)->grants, 1u);
}

TEST_F(SchedulerTest, IgnoresGpusTheClientDidNotRegister)
{
    gpu(0);
    gpu(1);
    client(1, {0});
    s_.request(1, gpu_bit(1), now_);
    EXPECT_TRUE(actions().empty());
    EXPECT_EQ(s_.client(1)->phase, Phase::Idle);
    s_.report_memory(1, 1, {GiB, 0}, now_);
    EXPECT_EQ(s_.requested_memory(1), 0u);
    EXPECT_FALSE(s_.connect(2, {}, {7})) << "unknown GPU index";
    EXPECT_FALSE(s_.connect(1, {}, {0})) << "id in use";
}

TEST_F(SchedulerTest, ReleaseWhileWaitingCancelsTheRequest)
{
    gpu(0);
    client(1);
    client(2);
    s_.request(1, gpu_bit(0), now_);
    s_.request(2, gpu_bit(0), now_);
    actions();
    s_.release(2, gpu_bit(0), now_);
    EXPECT_EQ(s_.client(2)->phase, Phase::Idle);
    advance(1h);
    EXPECT_TRUE(actions().empty()) << "no contender left: no drop";
}

TEST_F(SchedulerTest, GpuRegistryDeduplicatesAndIsBounded)
{
    EXPECT_EQ(gpu(5), gpu(5));
    for (int i = 0; i < static_cast<int>(kMaxGpus) + 5; ++i)
        s_.ensure_gpu({"GPU-x" + std::to_string(i), "", GiB});
    EXPECT_EQ(s_.gpus().size(), kMaxGpus);
    EXPECT_FALSE(s_.ensure_gpu({"GPU-one-too-many", "", GiB}));
}

TEST(ClientMasks, TranslateBetweenLocalAndGlobal)
{
    ClientRecord c;
    c.gpus = {4, 1, 7};
    EXPECT_EQ(c.to_global(0b101), gpu_bit(4) | gpu_bit(7));
    EXPECT_FALSE(c.to_global(0b1000));
    EXPECT_EQ(c.to_local(gpu_bit(1) | gpu_bit(7) | gpu_bit(9)), 0b110u);
}

// Random event sequences: the invariants hold whatever happens.
TEST(SchedulerProperties, InvariantsHoldUnderRandomEvents)
{
    std::mt19937 rng(12345);
    for (int round = 0; round < 40; ++round) {
        const Mode mode = static_cast<Mode>(round % 3);
        Scheduler s(SchedulerSettings{mode, 5s, 2s});
        TimePoint now{std::chrono::seconds(1)};
        const GpuIndex gpus = 3;
        for (GpuIndex g = 0; g < gpus; ++g)
            s.ensure_gpu({"GPU-" + std::to_string(g), "", 16 * GiB});
        std::set<ClientId> alive;
        ClientId next = 1;
        std::map<ClientId, TimePoint> waiting_since;
        for (int step = 0; step < 2000; ++step) {
            const int what = static_cast<int>(rng() % 8);
            now += std::chrono::milliseconds(rng() % 1500);
            if (what == 0 || alive.empty()) {
                std::vector<GpuIndex> mine;
                for (GpuIndex g = 0; g < gpus; ++g)
                    if (rng() % 2)
                        mine.push_back(g);
                if (mine.empty())
                    mine.push_back(0);
                // Three users and every class, so that fairness and
                // priorities are exercised too.
                ClientInfo info{static_cast<int32_t>(next), static_cast<uint32_t>(rng() % 3), ""};
                info.priority = static_cast<nvshare::proto::Priority>(1 + rng() % 3);
                ASSERT_TRUE(s.connect(next, info, mine));
                alive.insert(next++);
                continue;
            }
            auto it = alive.begin();
            std::advance(it, static_cast<long>(rng() % alive.size()));
            const ClientId id = *it;
            const ClientRecord* c = s.client(id);
            switch (what) {
                case 1:
                case 2:
                    s.request(id, c->registered() & (rng() | 1), now);
                    break;
                case 3:
                case 4:
                    s.release(id, c->registered(), now);
                    break;
                case 5:
                    s.report_memory(id, c->gpus[0], {(rng() % 20) * GiB, 0}, now);
                    break;
                case 6:
                    s.disconnect(id, now);
                    alive.erase(id);
                    break;
                default:
                    s.tick(now);
            }
            s.take_actions();
            // Exclusivity: a serializing GPU has one holder, or in auto
            // mode holders whose memory fits together (as it counts for
            // others: no claim for more than the GPU), except while the
            // extra holders are being asked to let go.
            for (GpuIndex g = 0; g < gpus; ++g) {
                const auto& holders = s.gpus()[g].holders;
                size_t not_dropping = 0;
                uint64_t their_memory = 0;
                for (ClientId h : holders) {
                    const ClientRecord* hc = s.client(h);
                    ASSERT_NE(hc, nullptr);
                    ASSERT_EQ(hc->phase, Phase::Holding);
                    ASSERT_TRUE(hc->held & gpu_bit(g));
                    not_dropping += !hc->drop_sent;
                    if (!hc->drop_sent && hc->memory.count(g) != 0)
                        their_memory += hc->memory.at(g).shared();
                }
                if (s.serializing(g) && not_dropping > 1) {
                    ASSERT_EQ(s.mode_of(g), Mode::Auto) << "GPU " << g;
                    ASSERT_LE(their_memory, s.gpus()[g].capacity) << "GPU " << g;
                }
            }
            // Progress: no waiter is stuck behind a free GPU, and whoever
            // waits has a deadline coming (its own bound to join, or the
            // quantum of whoever is in its way).
            bool anybody_waits = false;
            for (const auto& [cid, cl] : s.clients()) {
                if (cl.phase != Phase::Waiting)
                    continue;
                anybody_waits = true;
                bool blocked = false;
                for (GpuIndex g = 0; g < gpus; ++g)
                    if ((cl.wanted & gpu_bit(g)) && s.turns(g) != Turns::Free &&
                        (!s.gpus()[g].holders.empty() || s.queue(g).front() != cid))
                        blocked = true;
                ASSERT_TRUE(blocked)
                    << "client " << cid << " waits for free GPUs " << cl.wanted << " round "
                    << round << " step " << step << " uid " << cl.info.uid << " class "
                    << static_cast<int>(cl.info.priority);
            }
            if (anybody_waits) {
                ASSERT_TRUE(s.next_deadline().has_value()) << "round " << round << " step " << step;
            }
            // Soft turns never let one user run more processes on a GPU
            // than another user present there, beyond the ones being
            // rebalanced (their quantum ends within policy::kShareRebalance).
            for (GpuIndex g = 0; g < gpus; ++g) {
                if (s.turns(g) != Turns::Soft)
                    continue;
                std::map<uint32_t, std::vector<const ClientRecord*>> by_user;
                for (ClientId h : s.gpus()[g].holders)
                    by_user[s.client(h)->info.uid].push_back(s.client(h));
                std::set<uint32_t> present;
                for (const auto& [cid, cl] : s.clients())
                    if ((cl.phase == Phase::Waiting && (cl.wanted & gpu_bit(g))) ||
                        (cl.phase == Phase::Holding && (cl.held & gpu_bit(g))))
                        present.insert(cl.info.uid);
                for (auto& [uid, mine] : by_user) {
                    std::map<uint32_t, size_t> others;
                    for (uint32_t v : present)
                        if (v != uid)
                            others[v] = by_user.count(v) ? by_user[v].size() : 0;
                    const size_t cap = policy::user_share_cap(others);
                    std::sort(mine.begin(), mine.end(), [](auto* a, auto* b) {
                        return std::tie(a->granted_at, a->id) < std::tie(b->granted_at, b->id);
                    });
                    for (size_t i = cap; i < mine.size(); ++i) {
                        ASSERT_TRUE(
                            mine[i]->drop_sent ||
                            (mine[i]->deadline &&
                             *mine[i]->deadline <= mine[i]->granted_at + policy::kShareRebalance))
                            << "client " << mine[i]->id << " runs beyond its user's share";
                    }
                }
            }
            // Bounded waiting: deadlines exist whenever someone waits on a held GPU.
            for (const auto& [cid, cl] : s.clients()) {
                if (cl.phase == Phase::Holding && !s.queue(0).empty() && (cl.held & gpu_bit(0)) &&
                    s.serializing(0)) {
                    ASSERT_TRUE(s.next_deadline().has_value());
                }
            }
        }
    }
}

}  // namespace

// cuMemGetInfo in each process answers from what the others pin (issue 20).
TEST_F(SchedulerTest, TellsEachClientWhatTheOthersPin)
{
    gpu(0, 80 * GiB);
    client(1);
    client(2);
    host_confirms(1);
    EXPECT_EQ(unpageable(), U{});  // nobody pins anything yet
    s_.report_memory(1, 0, {8 * GiB, 2 * GiB}, now_);
    EXPECT_EQ(unpageable(), (U{{2, 2 * GiB}}));  // not 1: its own pinning is not news
    s_.report_memory(1, 0, {9 * GiB, 2 * GiB}, now_);
    EXPECT_EQ(unpageable(), U{});  // managed memory changes nothing
    s_.report_memory(1, 0, {9 * GiB, 2 * GiB + 4096}, now_);
    EXPECT_EQ(unpageable(), U{});  // under a MiB: not worth a message
    client(3);
    EXPECT_EQ(unpageable(), (U{{3, 2 * GiB + 4096}}));  // told at once on arrival
    host_confirms(3);
    s_.report_memory(3, 0, {0, 1 * GiB}, now_);
    EXPECT_EQ(unpageable(), (U{{1, 1 * GiB}, {2, 3 * GiB + 4096}}));
    s_.disconnect(1, now_);
    EXPECT_EQ(unpageable(), (U{{2, 1 * GiB}, {3, 0}}));
}

TEST_F(SchedulerTest, UnpageableIsPerGpu)
{
    gpu(0, 80 * GiB);
    gpu(1, 80 * GiB);
    client(1, {0});
    client(2, {1});
    s_.report_memory(1, 0, {0, 4 * GiB}, now_);
    EXPECT_EQ(unpageable(), U{});  // 2 is on another GPU
}
