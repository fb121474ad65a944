// What clients claim and report is bounded and can only make the scheduler
// more careful (issue 19): GPU memory claims, memory and swap reports, the
// GPUs one user may add, and how far a client's swap-in stretches its quantum.
#include <gtest/gtest.h>

#include "daemon/scheduler.h"
#include "tests/support/sizes.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

using nvshare::test::GiB;
const TimePoint t0{std::chrono::seconds(1000)};

std::optional<GpuIndex> claim(Scheduler& s, const std::string& uuid, uint64_t memory,
                              uint32_t uid = 1000, std::string* why = nullptr)
{
    std::string refusal;
    auto g = s.claim_gpu({uuid, "test", memory}, uid, t0, &refusal);
    if (why != nullptr)
        *why = refusal;
    return g;
}

TEST(SchedulerClaims, ImplausibleGpuMemoryIsRefused)
{
    Scheduler s;
    std::string why;
    EXPECT_FALSE(claim(s, "GPU-a", UINT64_MAX, 1000, &why));
    EXPECT_NE(why.find("implausible"), std::string::npos);
    EXPECT_FALSE(claim(s, "GPU-a", 1));
    EXPECT_FALSE(claim(s, "GPU-a", kMaxReportedBytes + 1));
    EXPECT_TRUE(claim(s, "GPU-a", kMaxReportedBytes));
    EXPECT_TRUE(claim(s, "GPU-b", kMinGpuMemory));
}

// Issue 47: a user's claim sets a GPU's size only while nothing is known;
// a later one, smaller or larger, changes nothing; root's word or the host's
// (NVML, at discovery) settles it.
TEST(SchedulerClaims, AUsersClaimStandsInOnlyUntilRootOrTheHostSaysTheSize)
{
    Scheduler s;
    const auto g = claim(s, "GPU-a", 8 * GiB * 1024);
    ASSERT_TRUE(g);
    EXPECT_EQ(s.gpus()[*g].capacity, 8 * GiB * 1024);
    EXPECT_EQ(claim(s, "GPU-a", GiB / 4), g);  // another user's smaller claim
    EXPECT_EQ(s.gpus()[*g].description.physical_memory, 8 * GiB * 1024);
    EXPECT_EQ(claim(s, "GPU-a", 16 * GiB, 0), g);  // root's
    EXPECT_EQ(s.gpus()[*g].description.physical_memory, 16 * GiB);
    EXPECT_EQ(s.gpus()[*g].capacity, 16 * GiB);
    for (const uint64_t lie : {GiB / 4, 80 * GiB}) {
        EXPECT_EQ(claim(s, "GPU-a", lie), g);
        EXPECT_EQ(s.gpus()[*g].description.physical_memory, 16 * GiB);
        EXPECT_EQ(s.gpus()[*g].capacity, 16 * GiB);
    }
}

TEST(SchedulerClaims, TheHostsSizeIsKeptWhateverAnyClientClaims)
{
    Scheduler s;
    const auto g = s.ensure_gpu({"GPU-a", "listed", 16 * GiB});
    ASSERT_TRUE(g);
    EXPECT_EQ(s.gpus()[*g].capacity, 16 * GiB);
    for (const uint32_t uid : {1000u, 0u})
        for (const uint64_t lie : {GiB / 4, 80 * GiB}) {
            EXPECT_EQ(claim(s, "GPU-a", lie, uid), g);
            EXPECT_EQ(s.gpus()[*g].description.physical_memory, 16 * GiB);
            EXPECT_EQ(s.gpus()[*g].capacity, 16 * GiB);
        }
    // A GPU the host lists without a size (no NVML): claims as above.
    const auto h = s.ensure_gpu({"GPU-b", "listed", 0});
    ASSERT_TRUE(h);
    EXPECT_EQ(claim(s, "GPU-b", 24 * GiB), h);
    EXPECT_EQ(claim(s, "GPU-b", GiB / 4), h);
    EXPECT_EQ(s.gpus()[*h].description.physical_memory, 24 * GiB);
}

TEST(SchedulerClaims, OneUserAddsAtMostFourGpusTheHostDoesNotList)
{
    Scheduler s;
    ASSERT_TRUE(s.ensure_gpu({"GPU-host", "listed", 0}));
    for (size_t i = 0; i < kMaxUnlistedGpusPerUser; ++i)
        EXPECT_TRUE(claim(s, "GPU-fake" + std::to_string(i), 16 * GiB, 65534));
    std::string why;
    EXPECT_FALSE(claim(s, "GPU-fake9", 16 * GiB, 65534, &why));
    EXPECT_NE(why.find("not a GPU the host lists"), std::string::npos) << why;
    // Listed GPUs, GPUs already known, other users and root are not held back.
    EXPECT_TRUE(claim(s, "GPU-host", 16 * GiB, 65534));
    EXPECT_TRUE(claim(s, "GPU-fake0", 16 * GiB, 65534));
    EXPECT_TRUE(claim(s, "GPU-other", 16 * GiB, 1001));
    for (int i = 0; i < 10; ++i)
        EXPECT_TRUE(claim(s, "GPU-root" + std::to_string(i), 16 * GiB, 0));
}

TEST(SchedulerClaims, ReportsPastTheBoundsAreRefusedAndChangeNothing)
{
    Scheduler s;
    const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    ASSERT_TRUE(s.connect(1, {1, 1000, "a"}, {*g}));
    ASSERT_TRUE(s.connect(2, {2, 1000, "b"}, {*g}));
    EXPECT_TRUE(s.report_memory(1, *g, {12 * GiB, 0}, t0));
    EXPECT_FALSE(s.report_memory(2, *g, {0 - 24 * GiB, 0}, t0));
    EXPECT_FALSE(s.report_memory(2, *g, {0, kMaxReportedBytes + 1}, t0));
    EXPECT_EQ(s.requested_memory(*g), 12 * GiB);
    EXPECT_TRUE(s.report_memory(2, *g, {kMaxReportedBytes, kMaxReportedBytes}, t0));
    // Its pinned part, unconfirmed, counts for itself alone; its swappable
    // part as the GPU's size.
    EXPECT_EQ(s.requested_memory(*g), 12 * GiB + 16 * GiB);
    EXPECT_TRUE(s.report_memory(2, *g, {0, 0}, t0));
    EXPECT_EQ(s.requested_memory(*g), 12 * GiB);

    SwapStats st;
    st.swap_ins = 1;
    st.swap_in_time = std::chrono::microseconds(kMaxReportedMicroseconds + 1);
    EXPECT_FALSE(s.report_swaps(1, *g, st, t0));
    st.swap_in_time = -1s;
    EXPECT_FALSE(s.report_swaps(1, *g, st, t0));
}

TEST(SchedulerClaims, ASwapInClaimStretchesOnlyTheClaimantsQuantumUpToTheCeiling)
{
    Scheduler s(SchedulerSettings{Mode::On, 300ms, 10s, 1s});
    const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    for (ClientId id : {1, 2, 3})
        ASSERT_TRUE(s.connect(id, {static_cast<int32_t>(id), 1000, "c"}, {*g}));
    s.request(1, gpu_bit(*g), t0);
    s.request(2, gpu_bit(*g), t0);
    SwapStats st;
    st.swap_ins = 1;
    st.swap_in_time = 100s;  // ten times that: far past the ceiling
    ASSERT_TRUE(s.report_swaps(1, *g, st, t0));
    EXPECT_EQ(s.quantum_for(*s.client(1)), 1s);
    EXPECT_EQ(s.next_deadline(), t0 + 1s);
    // Client 2's own quantum is the configured one, whatever 1 claimed.
    s.release(1, gpu_bit(*g), t0);
    s.request(3, gpu_bit(*g), t0);
    ASSERT_EQ(s.client(2)->phase, Phase::Holding);
    EXPECT_EQ(s.quantum_for(*s.client(2)), 300ms);
    EXPECT_EQ(s.next_deadline(), t0 + 300ms);
}

// The pinned memory others are told of, as the last Unpageable actions for
// each client said (client -> bytes).
std::map<ClientId, uint64_t> told(Scheduler& s)
{
    std::map<ClientId, uint64_t> out;
    for (const Action& a : s.take_actions())
        if (a.kind == ActionKind::Unpageable)
            out[a.client] = a.others_pinned;
    return out;
}

// Issue 47: a user's claim of pinned memory reaches others only as far as
// the host (NVML) confirms it: claiming 15 GiB of a 16 GiB GPU once made
// every other process's free memory read 0 and forced turns.
TEST(SchedulerClaims, PinnedMemoryCountsForOthersOnlyAsFarAsTheHostConfirms)
{
    Scheduler s(SchedulerSettings{Mode::Auto, 30s, 10s});
    const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    ASSERT_TRUE(s.connect(1, {1, 1000, "honest"}, {*g}));
    ASSERT_TRUE(s.connect(2, {2, 1001, "liar"}, {*g}));
    ASSERT_TRUE(s.report_memory(1, *g, {4 * GiB, 0}, t0));
    (void)s.take_actions();
    ASSERT_TRUE(s.report_memory(2, *g, {0, 15 * GiB}, t0));
    EXPECT_EQ(told(s), (std::map<ClientId, uint64_t>{}));
    EXPECT_EQ(s.requested_memory(*g), 4 * GiB);
    EXPECT_FALSE(s.serializing(*g));
    EXPECT_EQ(s.client(2)->memory.at(*g).pinned, 15 * GiB);  // its own view keeps it

    s.confirm_memory(2, *g, 2 * GiB, t0);  // what NVML counts for its process
    EXPECT_EQ(told(s), (std::map<ClientId, uint64_t>{{1, 2 * GiB}}));
    EXPECT_EQ(s.requested_memory(*g), 6 * GiB);
    s.confirm_memory(2, *g, 15 * GiB, t0);
    EXPECT_EQ(told(s), (std::map<ClientId, uint64_t>{{1, 15 * GiB}}));
    EXPECT_TRUE(s.serializing(*g));
    s.confirm_memory(2, *g, std::nullopt, t0);  // NVML can no longer say
    EXPECT_EQ(told(s), (std::map<ClientId, uint64_t>{{1, 0}}));
    EXPECT_FALSE(s.serializing(*g));
}

// Root's clients need no confirmation; nobody's pinned memory counts for
// more than the GPU has.
TEST(SchedulerClaims, RootsPinnedMemoryCountsAndNoClaimExceedsTheGpu)
{
    Scheduler s;
    const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    ASSERT_TRUE(s.connect(1, {1, 1000, "user"}, {*g}));
    ASSERT_TRUE(s.connect(2, {2, 0, "root"}, {*g}));
    (void)s.take_actions();
    ASSERT_TRUE(s.report_memory(2, *g, {0, 3 * GiB}, t0));
    EXPECT_EQ(told(s), (std::map<ClientId, uint64_t>{{1, 3 * GiB}}));
    ASSERT_TRUE(s.report_memory(2, *g, {0, kMaxReportedBytes}, t0));
    EXPECT_EQ(told(s), (std::map<ClientId, uint64_t>{{1, 16 * GiB}}));
    EXPECT_EQ(s.requested_memory(*g), 16 * GiB);
}

// Issue 47: a user's claim of swappable memory counts for others only as
// far as the host confirms it (its GPU memory as NVML counts it beyond the
// pinned part, and its resident host memory), beyond that only for
// kClaimGrace after it was reported.
TEST(SchedulerClaims, SwappableMemoryCountsForOthersAsConfirmedOrForItsGrace)
{
    Scheduler s(SchedulerSettings{Mode::Auto, 30s, 10s});
    const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    ASSERT_TRUE(s.connect(1, {1, 1000, "honest"}, {*g}));
    ASSERT_TRUE(s.connect(2, {2, 1001, "liar"}, {*g}));
    ASSERT_TRUE(s.report_memory(1, *g, {10 * GiB, 0}, t0));
    s.confirm_memory(1, *g, 10 * GiB, t0);
    ASSERT_TRUE(s.report_memory(2, *g, {12 * GiB, 0}, t0));
    EXPECT_EQ(s.requested_memory(*g), 22 * GiB);  // the host cannot say yet
    s.confirm_memory(2, *g, 0, t0);               // NVML lists nothing for it
    s.confirm_host_memory(2, GiB / 2, t0);        // and its host memory is small
    EXPECT_EQ(s.requested_memory(*g), 22 * GiB);  // within its grace
    EXPECT_TRUE(s.serializing(*g));
    EXPECT_EQ(s.next_deadline(), t0 + kClaimGrace);
    s.tick(t0 + kClaimGrace);
    EXPECT_EQ(s.requested_memory(*g), 10 * GiB + GiB / 2);
    EXPECT_FALSE(s.serializing(*g));
    EXPECT_EQ(s.client(2)->memory.at(*g).managed, 12 * GiB);  // its own view keeps it
    EXPECT_EQ(s.client(2)->memory.at(*g).confirmed_managed, GiB / 2);
    // Reporting again starts no new grace.
    ASSERT_TRUE(s.report_memory(2, *g, {0, 0}, t0 + 20s));
    ASSERT_TRUE(s.report_memory(2, *g, {12 * GiB, 0}, t0 + 21s));
    EXPECT_EQ(s.requested_memory(*g), 10 * GiB + GiB / 2);
    // What the host confirms counts: its GPU memory and its host memory.
    s.confirm_memory(2, *g, 4 * GiB, t0 + 22s);
    s.confirm_host_memory(2, 6 * GiB, t0 + 22s);
    EXPECT_EQ(s.requested_memory(*g), 20 * GiB);
    EXPECT_TRUE(s.serializing(*g));
}

// A user has one unconfirmed grace at a time on a GPU: a second process of
// theirs claiming memory nobody confirms counts for others as confirmed
// only, until the first one's claim is confirmed; another user is not
// affected.
TEST(SchedulerClaims, AUserHasOneUnconfirmedGraceAtATimeOnAGpu)
{
    Scheduler s(SchedulerSettings{Mode::Auto, 30s, 10s});
    const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    ASSERT_TRUE(s.connect(1, {1, 1001, "first"}, {*g}));
    ASSERT_TRUE(s.connect(2, {2, 1001, "second"}, {*g}));
    ASSERT_TRUE(s.connect(3, {3, 1002, "other user"}, {*g}));
    for (const ClientId id : {1, 2, 3}) {
        s.confirm_memory(id, *g, 0, t0);
        s.confirm_host_memory(id, 0, t0);
    }
    ASSERT_TRUE(s.report_memory(1, *g, {6 * GiB, 0}, t0));
    ASSERT_TRUE(s.report_memory(2, *g, {6 * GiB, 0}, t0 + 1s));
    EXPECT_EQ(s.requested_memory(*g), 6 * GiB);  // the second has no grace
    ASSERT_TRUE(s.report_memory(3, *g, {2 * GiB, 0}, t0 + 1s));
    EXPECT_EQ(s.requested_memory(*g), 8 * GiB);  // another user's has
    // The first's memory is where the host sees it: its grace is paid, and
    // the second may have one.
    s.confirm_memory(1, *g, 6 * GiB, t0 + 2s);
    ASSERT_TRUE(s.report_memory(2, *g, {6 * GiB + GiB, 0}, t0 + 2s));
    EXPECT_EQ(s.requested_memory(*g), 6 * GiB + 7 * GiB + 2 * GiB);
}

// A process that ends with a grace the host never confirmed bars its user's
// new graces on that GPU for kClaimDebt: reconnecting buys no new grace,
// also before the host's first reading of the new process where the host
// counts the GPU's processes (a new connection's claim no longer counts
// whole until then).
TEST(SchedulerClaims, ReconnectingBuysNoNewGrace)
{
    for (const bool read : {true, false}) {
        SCOPED_TRACE(read ? "the host read each process" : "before the host's first reading");
        Scheduler s(SchedulerSettings{Mode::Auto, 30s, 10s});
        const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
        s.set_host_counts_processes(*g, true);
        const auto liar = [&](ClientId id, uint32_t uid, TimePoint at) {
            ASSERT_TRUE(s.connect(id, {static_cast<int32_t>(id), uid, "liar"}, {*g}));
            if (read) {
                s.confirm_memory(id, *g, 0, at);
                s.confirm_host_memory(id, 0, at);
            }
            ASSERT_TRUE(s.report_memory(id, *g, {12 * GiB, 0}, at));
        };
        liar(1, 1001, t0);
        EXPECT_EQ(s.requested_memory(*g), 12 * GiB);  // its grace
        s.disconnect(1, t0 + 5s);
        liar(2, 1001, t0 + 6s);
        EXPECT_EQ(s.requested_memory(*g), 0u);
        s.disconnect(2, t0 + 7s);
        liar(3, 1002, t0 + 8s);  // another user
        EXPECT_EQ(s.requested_memory(*g), 12 * GiB);
        s.disconnect(3, t0 + 9s);
        liar(4, 1001, t0 + 5s + kClaimDebt - 1s);
        EXPECT_EQ(s.requested_memory(*g), 0u);
        s.disconnect(4, t0 + 5s + kClaimDebt);
        liar(5, 1001, t0 + 5s + kClaimDebt);
        EXPECT_EQ(s.requested_memory(*g), 12 * GiB);
    }
}

// While the honest newcomer's claim counts (its grace, which lasts while
// it waits for its turn), the holder leaves it room when it lets go; a
// claim the host never confirms makes it leave nothing after the grace.
TEST(SchedulerClaims, AHolderLeavesRoomForAnUnconfirmedNewcomerOnlyInItsGrace)
{
    for (const bool late : {false, true}) {
        Scheduler s(SchedulerSettings{Mode::On, 30s, 10s});
        const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
        ASSERT_TRUE(s.connect(1, {1, 1000, "holder"}, {*g}));
        ASSERT_TRUE(s.connect(2, {2, 1001, "newcomer"}, {*g}));
        ASSERT_TRUE(s.report_memory(1, *g, {12 * GiB, 0}, t0));
        s.confirm_memory(1, *g, 12 * GiB, t0);
        s.request(1, gpu_bit(*g), t0);
        ASSERT_TRUE(s.report_memory(2, *g, {12 * GiB, 0}, t0));
        s.confirm_memory(2, *g, 0, t0);
        s.confirm_host_memory(2, 0, t0);
        const TimePoint asked = late ? t0 + kClaimGrace : t0 + 1s;
        s.tick(asked);
        s.request(2, gpu_bit(*g), asked);
        (void)s.take_actions();
        s.tick(asked + 30s);  // the holder's quantum ends
        uint64_t keep = UINT64_MAX;
        for (const Action& a : s.take_actions())
            if (a.kind == ActionKind::Drop && a.client == 1)
                keep = a.keep;
        EXPECT_EQ(keep, late ? UINT64_MAX : 4 * GiB) << late;
        if (late)
            continue;
        // Its grace lasted while it waited (past kClaimGrace after its
        // report), and lasts kClaimGrace from its grant.
        s.release(1, gpu_bit(*g), asked + 31s);
        EXPECT_EQ(s.client(2)->phase, Phase::Holding);
        EXPECT_EQ(s.requested_memory(*g), 24 * GiB);
        s.tick(asked + 31s + kClaimGrace - 1ns);
        EXPECT_EQ(s.requested_memory(*g), 24 * GiB);
        s.tick(asked + 31s + kClaimGrace);
        EXPECT_EQ(s.requested_memory(*g), 12 * GiB);
    }
}

// A claimer that leaves the line before its turn and asks again keeps its
// claim counting no longer than kClaimGrace after it left.
TEST(SchedulerClaims, LeavingTheLineEndsTheWaitsHoldOnTheGrace)
{
    Scheduler s(SchedulerSettings{Mode::On, 30s, 10s});
    const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    ASSERT_TRUE(s.connect(1, {1, 1000, "holder"}, {*g}));
    ASSERT_TRUE(s.connect(2, {2, 1001, "liar"}, {*g}));
    ASSERT_TRUE(s.report_memory(1, *g, {12 * GiB, 0}, t0));
    s.confirm_memory(1, *g, 12 * GiB, t0);
    s.request(1, gpu_bit(*g), t0);
    ASSERT_TRUE(s.report_memory(2, *g, {12 * GiB, 0}, t0));
    s.request(2, gpu_bit(*g), t0);
    s.confirm_memory(2, *g, 0, t0 + 1s);
    s.confirm_host_memory(2, 0, t0 + 1s);
    s.release(2, gpu_bit(*g), t0 + 10s);  // before its turn
    s.request(2, gpu_bit(*g), t0 + 11s);
    s.tick(t0 + 1s + kClaimGrace);
    EXPECT_EQ(s.requested_memory(*g), 12 * GiB);
    EXPECT_EQ(s.client(2)->phase, Phase::Waiting);
}

// A swappable claim beyond the GPU counts as the GPU, root's too.
TEST(SchedulerClaims, NoSwappableClaimCountsForMoreThanTheGpu)
{
    Scheduler s(SchedulerSettings{Mode::Auto, 30s, 10s});
    const auto g = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    ASSERT_TRUE(s.connect(1, {1, 0, "root"}, {*g}));
    ASSERT_TRUE(s.connect(2, {2, 1001, "user"}, {*g}));
    ASSERT_TRUE(s.report_memory(1, *g, {kMaxReportedBytes, 0}, t0));
    EXPECT_EQ(s.requested_memory(*g), 16 * GiB);
    EXPECT_FALSE(s.serializing(*g));
    ASSERT_TRUE(s.report_memory(2, *g, {kMaxReportedBytes, 0}, t0));
    EXPECT_EQ(s.requested_memory(*g), 32 * GiB);
    EXPECT_EQ(s.client(2)->memory.at(*g).managed, kMaxReportedBytes);
}

// One process's host memory confirms its claims on its GPUs once, in
// their order.
TEST(SchedulerClaims, HostMemoryConfirmsAProcesssClaimsOnItsGpusOnce)
{
    Scheduler s(SchedulerSettings{Mode::Auto, 30s, 10s});
    const auto a = s.ensure_gpu({"GPU-a", "t", 16 * GiB});
    const auto b = s.ensure_gpu({"GPU-b", "t", 16 * GiB});
    ASSERT_TRUE(s.connect(1, {1, 1000, "two"}, {*a, *b}));
    ASSERT_TRUE(s.report_memory(1, *a, {8 * GiB, 0}, t0));
    ASSERT_TRUE(s.report_memory(1, *b, {8 * GiB, 0}, t0));
    s.confirm_memory(1, *a, 2 * GiB, t0);
    s.confirm_memory(1, *b, 0, t0);
    s.confirm_host_memory(1, 10 * GiB, t0);
    s.tick(t0 + kClaimGrace);
    EXPECT_EQ(s.requested_memory(*a), 8 * GiB);  // 2 on the GPU, 6 in host memory
    EXPECT_EQ(s.requested_memory(*b), 4 * GiB);  // the host memory left
    // Less host memory: GPU a's claim, confirmed whole before, gets a grace
    // again; b's, never confirmed whole, gets none.
    s.confirm_host_memory(1, 4 * GiB, t0 + 16s);
    EXPECT_EQ(s.requested_memory(*a), 8 * GiB);
    EXPECT_EQ(s.requested_memory(*b), 0u);
    s.tick(t0 + 16s + kClaimGrace);
    EXPECT_EQ(s.requested_memory(*a), 6 * GiB);
    EXPECT_EQ(s.requested_memory(*b), 0u);
}

}  // namespace
