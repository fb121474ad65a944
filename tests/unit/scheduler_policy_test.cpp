// The scheduler's policies beyond first come first served (issue 14): auto
// mode's soft turns while memory fits, priority classes with aging, fairness
// between users, and a GPU's own mode and quantum. Each test fails without
// the policy it names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/scheduler.h"
#include "tests/support/sizes.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

using nvshare::test::GiB;
using V = std::vector<std::string>;

class PolicyTest : public ::testing::Test {
protected:
    explicit PolicyTest(Mode mode = Mode::Auto) : s_(SchedulerSettings{mode, 30s, 10s}) {}

    void gpus(int n)
    {
        for (int i = 0; i < n; ++i)
            s_.ensure_gpu({"GPU-" + std::to_string(i), "test", 80 * GiB});
    }
    void client(ClientId id, uint32_t uid = 1000, Priority priority = Priority::Normal,
                std::vector<GpuIndex> on = {0})
    {
        ClientInfo info{static_cast<int32_t>(id), uid, "c"};
        info.priority = priority;
        ASSERT_TRUE(s_.connect(id, info, on, now_));
    }
    void advance(Duration d)
    {
        now_ += d;
        s_.tick(now_);
    }
    void request(ClientId id, GpuSet g = gpu_bit(0)) { s_.request(id, g, now_); }
    void release(ClientId id, GpuSet g = gpu_bit(0)) { s_.release(id, g, now_); }
    // Grants, drops, revocations and contention notices, as "G1", "D1", ...
    V actions()
    {
        V out;
        for (const Action& a : s_.take_actions()) {
            if (a.kind == ActionKind::Waiting) {
                reasons_.push_back(std::to_string(a.client) + ":" +
                                   nvshare::proto::wait_reason_name(a.wait.reason));
                continue;
            }
            if (a.kind == ActionKind::Unpageable)
                continue;
            if (a.kind == ActionKind::RunAhead) {
                run_ahead_.push_back(std::to_string(a.client) + (a.bounded ? ":bounded" : ":free"));
                continue;
            }
            const char* k = a.kind == ActionKind::Grant    ? "G"
                            : a.kind == ActionKind::Drop   ? "D"
                            : a.kind == ActionKind::Revoke ? "R"
                                                           : "C";
            out.push_back(k + std::to_string(a.client));
        }
        return out;
    }
    // A burst of `length` that ended by the client's own release while
    // another client (`other`) wanted the GPU: how the scheduler learns a
    // client's bursts. The other one's hold is then taken away, which
    // teaches nothing about its bursts.
    void teach_burst(ClientId id, ClientId other, Duration length)
    {
        start(id);
        start(other);
        request(id);
        request(other);
        advance(length);
        release(id);
        s_.revoke(other, now_);
        actions();
    }
    // A first hold, with no memory, past the start (policy::kStartupWindow).
    void start(ClientId id)
    {
        if (s_.client(id)->first_granted_at)
            return;
        request(id);
        advance(policy::kStartupWindow);
        release(id);
        actions();
    }
    bool holds(ClientId id) const { return s_.client(id)->phase == Phase::Holding; }

    Scheduler s_;
    TimePoint now_{std::chrono::seconds(1000)};
    V reasons_;
    V run_ahead_;
};

class PolicyOnTest : public PolicyTest {
protected:
    PolicyOnTest() : PolicyTest(Mode::On) {}
};

// ---- auto mode while memory fits: soft turns ----

TEST_F(PolicyTest, ClientsWithUnknownBurstsRunTogether)
{
    gpus(1);
    client(1);
    client(2);
    request(1);
    request(2);
    // Steady jobs (no burst known) run together, as plain CUDA would, once
    // the first has started (policy::kStartupWindow, as it allocates
    // nothing); once both have started each is told that the other wants
    // the GPU, so that it hands over when it goes idle.
    EXPECT_EQ(actions(), V{"G1"});
    advance(policy::kStartupWindow - 1ms);
    EXPECT_TRUE(actions().empty());
    advance(1ms);
    EXPECT_EQ(actions(), V{"G2"});
    advance(policy::kStartupWindow);
    EXPECT_EQ(actions(), (V{"C1", "C2"}));
    advance(1h);
    EXPECT_TRUE(actions().empty()) << "nobody waits: no quantum runs out";
}

TEST_F(PolicyTest, ANewcomerJoinsAStartingProcessOnceItsMemoryStopsGrowing)
{
    gpus(1);
    client(1);
    client(2);
    request(1);
    advance(10ms);
    request(2);
    EXPECT_EQ(actions(), V{"G1"}) << "1 has not reported its memory yet; 2 makes it no hurry";
    // 1 allocates: every report that its memory grew starts the wait anew.
    for (uint64_t i = 1; i <= 5; ++i) {
        s_.report_memory(1, 0, {i * 10 * GiB, 0}, now_);
        advance(100ms);
    }
    s_.report_memory(1, 0, {45 * GiB, 0}, now_);  // less: not growth
    EXPECT_FALSE(holds(2)) << "1 allocated 100 ms ago";
    advance(policy::kStartupSettle - 100ms - 1ms);
    EXPECT_FALSE(holds(2));
    advance(1ms);
    EXPECT_TRUE(holds(2)) << "1's memory has not grown for kStartupSettle";
}

TEST_F(PolicyTest, ASmallFirstAllocationDoesNotEndAStart)
{
    gpus(1);
    client(1);
    client(2);
    request(1);
    request(2);
    s_.report_memory(1, 0, {2 << 20, 0}, now_);  // a framework's first block
    advance(policy::kStartupSettle + 100ms);
    EXPECT_FALSE(holds(2)) << "2 MiB say nothing of 1's size";
    s_.report_memory(1, 0, {policy::kStartupGrowthFrom, 0}, now_);
    advance(policy::kStartupSettle - 1ms);
    EXPECT_FALSE(holds(2));
    advance(1ms);
    EXPECT_TRUE(holds(2)) << "1's memory has not grown for kStartupSettle";
}

TEST_F(PolicyTest, AProcessThatKeepsGrowingHoldsNewcomersBackOnlyAtItsStart)
{
    gpus(1);
    client(1);
    client(2);
    client(3);
    request(1);
    const TimePoint start = now_;
    request(2);
    for (uint64_t i = 1; !holds(2) && i < 100; ++i) {
        s_.report_memory(1, 0, {i * GiB, 0}, now_);
        advance(100ms);
    }
    EXPECT_TRUE(holds(2));
    EXPECT_EQ(now_ - start, policy::kStartupWindow) << "1 still grows, but started long ago";
    advance(policy::kStartupWindow);
    s_.report_memory(1, 0, {60 * GiB, 0}, now_);
    s_.report_memory(2, 0, {10 * GiB, 0}, now_);
    request(3);
    EXPECT_TRUE(holds(3)) << "growth after the start holds nobody back";
}

TEST_F(PolicyTest, AStartingProcessMakesNobodyHandOverNorHoldsBackOnesThatStarted)
{
    gpus(1);
    client(1);
    client(2);
    start(1);
    request(2);
    request(1);
    // 1 has started: it joins 2's start at once (its memory is placed
    // already). Neither hands over while 2 starts: 1 would hand the GPU
    // over into the start, which may fill it.
    EXPECT_EQ(actions(), (V{"G2", "G1"}));
    EXPECT_FALSE(s_.client(1)->contended_sent);
    EXPECT_FALSE(s_.client(2)->contended_sent);
    s_.report_memory(2, 0, {10 * GiB, 0}, now_ + 100ms);
    advance(policy::kStartupSettle);
    EXPECT_TRUE(actions().empty()) << "2's memory grew 200 ms ago";
    advance(100ms);
    EXPECT_EQ(actions(), (V{"C1", "C2"}));
}

TEST_F(PolicyTest, BurstyClientsTakeTurnsAtTheEndOfABurst)
{
    gpus(1);
    client(1);
    client(2);
    teach_burst(1, 2, 2s);
    teach_burst(2, 1, 2s);
    EXPECT_EQ(s_.client(1)->burst, 2s);
    EXPECT_EQ(s_.client(2)->burst, 2s);
    // 1 runs a burst; 2 comes 0.5 s later: its 2 s burst would take longer
    // than what is left of 1's, so it waits for the end of 1's burst.
    request(1);
    advance(500ms);
    request(2);
    EXPECT_EQ(actions(), (V{"G1", "C1"}));
    EXPECT_EQ(reasons_, V{"2:turns"});
    EXPECT_EQ(s_.turns(0), Turns::Soft);
    advance(1500ms);
    release(1);  // 1's burst is over: 2 goes
    EXPECT_EQ(actions(), V{"G2"});
}

// One who joins the holders changes when the others may: here its burst is
// not known (it may run as long as it likes), so the one waiting for the
// end of the holder's burst joins at once as well, not at its old bound.
TEST_F(PolicyTest, AWaiterJoinsAtOnceWhenOneWithAnUnknownBurstJoins)
{
    gpus(1);
    client(1);
    client(2);
    client(3);
    teach_burst(1, 2, 2s);
    teach_burst(2, 1, 2s);
    start(3);
    request(1);
    advance(500ms);
    request(2);
    EXPECT_EQ(actions(), (V{"G1", "C1"}));  // 2 waits for the end of 1's burst
    request(3);
    EXPECT_EQ(actions(), (V{"G3", "G2"}));
}

TEST_F(PolicyTest, AWaitForTheHolderIsBoundedByTwiceTheWaitersBurst)
{
    gpus(1);
    client(1);
    client(2);
    teach_burst(1, 2, 2s);
    teach_burst(2, 1, 2s);
    request(1);
    advance(1s);
    request(2);
    actions();
    // 1 runs far past its usual burst: 2 joins it 4 s after it asked.
    advance(3999ms);
    EXPECT_FALSE(holds(2));
    advance(1ms);
    EXPECT_TRUE(holds(2));
}

TEST_F(PolicyTest, AShortBurstRunsAlongsideALongOneAtOnce)
{
    gpus(1);
    client(1);  // batch-like job, long bursts
    client(2);  // interactive-like job, 50 ms bursts
    teach_burst(1, 2, 4s);
    teach_burst(2, 1, 50ms);
    request(1);
    advance(1s);
    request(2);
    EXPECT_EQ(actions(), (V{"G1", "G2", "C1"})) << "never waits behind a long burst";
}

TEST_F(PolicyTest, ALongerBurstThanTheWaitersIsNotWaitedFor)
{
    gpus(1);
    client(1);
    client(2);
    teach_burst(1, 2, 8s);
    teach_burst(2, 1, 1s);
    request(1);
    advance(1s);
    request(2);  // 7 s of 1's burst are left, more than 2's own 1 s burst
    EXPECT_EQ(actions(), (V{"G1", "G2", "C1"}));
}

TEST_F(PolicyTest, BatchClassTakesTurnsForAQuantumAndInteractiveNever)
{
    gpus(1);
    client(1);
    client(2, 1000, Priority::Batch);
    client(3, 1000, Priority::Interactive);
    request(1);
    request(2);
    request(3);
    EXPECT_EQ(actions(), (V{"G1", "G3"})) << "interactive joins at once; batch waits";
    advance(policy::kStartupWindow);  // they allocate nothing
    EXPECT_EQ(actions(), (V{"C1", "C3"})) << "once both have started";
    advance(27s);
    EXPECT_FALSE(holds(2));
    advance(1s);
    EXPECT_TRUE(holds(2)) << "batch joins after a quantum";
}

// A quantum set at run time bounds the waits under way too: the batch
// process that began to wait under a 30 s quantum joins 10 s after it
// asked once the quantum is 10 s, and at once where it waited longer.
TEST_F(PolicyTest, ANewQuantumBoundsTheWaitsUnderWay)
{
    gpus(1);
    client(1);
    client(2, 1001, Priority::Batch);
    client(3, 1002, Priority::Batch);
    start(1);
    start(2);
    start(3);
    request(1);
    request(2);
    advance(6s);
    request(3);
    EXPECT_EQ(actions(), (V{"G1", "C1"}));
    s_.set_time_quantum(5s, now_);  // 2 waited 6 s
    EXPECT_EQ(actions(), V{"G2"});
    advance(5s - 1ms);
    EXPECT_FALSE(holds(3));
    advance(1ms);
    EXPECT_TRUE(holds(3));
}

// The same for a GPU's own quantum.
TEST_F(PolicyTest, AGpusNewQuantumBoundsTheWaitsUnderWay)
{
    gpus(1);
    client(1);
    client(2, 1001, Priority::Batch);
    start(1);
    start(2);
    request(1);
    request(2);
    advance(6s);
    EXPECT_EQ(actions(), (V{"G1", "C1"}));
    s_.set_gpu_time_quantum("GPU-0", 5s, now_);
    EXPECT_EQ(actions(), V{"G2"});
}

// ---- fairness between users ----

TEST_F(PolicyTest, OneUsersManyProcessesDoNotCrowdOutAnother)
{
    gpus(1);
    for (ClientId id : {1, 2, 3, 4})
        client(id, 1001);
    client(5, 1002);
    for (ClientId id : {1, 2, 3, 4})
        request(id);
    // They start one at a time (policy::kStartupWindow, as they allocate
    // nothing).
    for (int i = 0; i < 3; ++i)
        advance(policy::kStartupWindow);
    EXPECT_TRUE(holds(4)) << "alone, one user's processes run together";
    advance(policy::kStartupWindow);
    (void)actions();
    request(5);
    // User 1001 runs 4 processes to 1002's 1: the 3 granted last, which
    // held for more than kShareRebalance, are asked to let go...
    EXPECT_EQ(actions(), (V{"G5", "D2", "D3", "D4"})) << "another user joins at once";
    s_.report_memory(5, 0, {1 * GiB, 0}, now_);  // it allocates: it starts
    advance(policy::kShareRebalance);
    // 5 has started by now: it is told that others want the GPU too.
    EXPECT_EQ(actions(), V{"C5"});
    for (ClientId id : {2, 3, 4}) {
        release(id);
        request(id);  // they still have work
    }
    actions();
    // ... and wait: one process each while both users want the GPU.
    EXPECT_TRUE(holds(1));
    EXPECT_TRUE(holds(5));
    for (ClientId id : {2, 3, 4})
        EXPECT_FALSE(holds(id));
    // 1001's processes take turns among themselves at quantum ends; 1002's
    // one is not asked to let go for them.
    advance(30s);
    EXPECT_EQ(actions(), V{"D1"});
    release(1);
    EXPECT_TRUE(holds(2));
    EXPECT_TRUE(holds(5));
}

TEST_F(PolicyOnTest, TheUserWhoHeldLeastGoesFirst)
{
    gpus(1);
    client(1, 1001);
    client(2, 1001);
    client(3, 1002);
    request(1);
    request(2);  // came before 3...
    request(3);
    actions();
    advance(30s);
    release(1);
    // ... but 1001 just held the GPU for 30 s and 1002 never did.
    EXPECT_EQ(actions(), (V{"D1", "G3"}));
    EXPECT_EQ(s_.queue(0), std::vector<ClientId>{2});
}

TEST_F(PolicyOnTest, FourToOneProcessesStillShareTimeEvenly)
{
    gpus(1);
    for (ClientId id : {1, 2, 3, 4})
        client(id, 1001);
    client(5, 1002);
    for (ClientId id : {1, 2, 3, 4, 5})
        request(id);
    actions();
    // Busy clients: each uses its whole quantum and asks again at once.
    std::map<uint32_t, int> turns;
    for (int i = 0; i < 40; ++i) {
        const ClientId h = s_.gpus()[0].holders.at(0);
        turns[s_.client(h)->info.uid]++;
        advance(30s);
        release(h);
        request(h);
        actions();
    }
    EXPECT_EQ(turns[1001], 20);
    EXPECT_EQ(turns[1002], 20);
}

// ---- priority classes ----

TEST_F(PolicyOnTest, InteractiveGoesFirstAndCutsTheQuantumShort)
{
    gpus(1);
    client(1);
    client(2);
    client(3, 1000, Priority::Interactive);
    request(1);
    request(2);
    advance(10s);
    request(3);
    // 1 has held for 10 s, beyond what an interactive waiter allows.
    EXPECT_EQ(actions(), (V{"G1", "C1", "D1"}));
    release(1);
    EXPECT_EQ(actions(), V{"G3"}) << "ahead of 2, which came first";
    EXPECT_EQ(s_.queue(0), std::vector<ClientId>{2});
}

// A holder whose GPU also serves a higher class keeps its queued work short,
// so that when it is asked to let go it can do so at once.
TEST_F(PolicyOnTest, AHolderBelowARegisteredHigherClassBoundsItsRunAhead)
{
    gpus(1);
    client(1, 1000, Priority::Batch);
    request(1);
    actions();
    EXPECT_TRUE(run_ahead_.empty()) << "alone: queues freely";
    client(2);  // normal: higher than batch, registered, not even waiting
    actions();
    EXPECT_EQ(run_ahead_, V{"1:bounded"});
    s_.disconnect(2, now_);
    actions();
    EXPECT_EQ(run_ahead_, (V{"1:bounded", "1:free"}));
    client(3, 1000, Priority::Batch);  // same class: nothing to make room for
    actions();
    EXPECT_EQ(run_ahead_.size(), 2u);
    // A new hold starts free; the holder's own class decides.
    release(1);
    client(4, 1000, Priority::Interactive);
    request(4);
    actions();
    EXPECT_EQ(run_ahead_.size(), 2u) << "the interactive holder is the highest class";
}

// A higher-class process that has not used the GPU for
// kHigherClassIdleRelease no longer bounds the holder (issue 47: an idle
// interactive registration kept every lower-class holder bounded for as long
// as it stayed connected); its next request bounds it again.
TEST_F(PolicyOnTest, AnIdleHigherClassStopsBoundingTheHolder)
{
    gpus(1);
    client(1, 1000, Priority::Batch);
    request(1);
    client(2, 1001, Priority::Interactive);
    actions();
    EXPECT_EQ(run_ahead_, V{"1:bounded"});
    // The scheduler wants to look again when client 2 has been idle long enough.
    ASSERT_TRUE(s_.next_deadline());
    EXPECT_LE(*s_.next_deadline(), now_ + nvshare::daemon::policy::kHigherClassIdleRelease);
    advance(nvshare::daemon::policy::kHigherClassIdleRelease - 1s);
    s_.tick(now_);
    actions();
    EXPECT_EQ(run_ahead_, V{"1:bounded"}) << "not idle long enough yet";
    advance(2s);
    s_.tick(now_);
    actions();
    EXPECT_EQ(run_ahead_, (V{"1:bounded", "1:free"}));
    request(2);  // it comes back: the holder is bounded again while it waits
    actions();
    EXPECT_EQ(run_ahead_.front(), "1:bounded");
    EXPECT_EQ(run_ahead_.at(2), "1:bounded");
}

TEST_F(PolicyOnTest, AHoldStartsBoundedWhenAHigherClassIsAlreadyHere)
{
    gpus(1);
    client(1, 1000, Priority::Interactive);
    client(2, 1000, Priority::Batch);
    request(2);
    bool bounded_grant = false;
    for (const Action& a : s_.take_actions())
        if (a.kind == ActionKind::Grant && a.client == 2)
            bounded_grant = a.bounded;
    EXPECT_TRUE(bounded_grant) << "bounded from its first submission, in the Grant itself";
    actions();
    EXPECT_TRUE(run_ahead_.empty()) << "no separate message needed";
}

TEST_F(PolicyTest, RunAheadIsBoundedOnlyWhereProcessesTakeTurns)
{
    gpus(1);
    client(1, 1000, Priority::Batch);
    client(2, 1000, Priority::Interactive);
    request(1);
    actions();
    EXPECT_TRUE(run_ahead_.empty()) << "memory fits: the interactive process joins at once";
    s_.set_mode(Mode::On, now_);
    actions();
    EXPECT_EQ(run_ahead_, V{"1:bounded"});
    s_.set_mode(Mode::Auto, now_);
    actions();
    EXPECT_EQ(run_ahead_, (V{"1:bounded", "1:free"}));
}

TEST_F(PolicyOnTest, AWaiterAheadOfItsPlaceSaysPriority)
{
    gpus(1);
    client(1);
    client(2);
    client(3, 1000, Priority::Interactive);
    request(1);
    request(2);
    request(3);
    actions();
    // 3 is told it is next; 2, which came first, that priority is why it
    // is second.
    EXPECT_EQ(reasons_, (V{"3:mode on", "2:priority"}));
}

TEST_F(PolicyOnTest, BatchAgesAndNeverStarves)
{
    gpus(1);
    client(1);
    client(2, 1000, Priority::Batch);
    client(3);
    request(1);
    request(3);
    request(2);
    actions();
    // Normal clients keep asking again; the batch client's wait raises it
    // one class per quantum (30 s).
    advance(30s);
    release(1);
    request(1);
    EXPECT_TRUE(holds(3)) << "after 30 s batch ranks as a fresh normal waiter: 3 is older";
    advance(30s);
    release(3);
    request(3);
    EXPECT_TRUE(holds(2)) << "after 60 s it ranks with 1, and came first";
}

// ---- a GPU's own mode and quantum ----

TEST_F(PolicyTest, EachGpuHasItsOwnModeAndQuantum)
{
    gpus(2);
    s_.set_gpu_mode("GPU-1", Mode::On, now_);
    s_.set_gpu_time_quantum("GPU-1", 2s, now_);
    EXPECT_EQ(s_.mode_of(0), Mode::Auto);
    EXPECT_EQ(s_.mode_of(1), Mode::On);
    EXPECT_EQ(s_.time_quantum_of(0), 30s);
    EXPECT_EQ(s_.time_quantum_of(1), 2s);
    client(1, 1000, Priority::Normal, {0, 1});
    client(2, 1000, Priority::Normal, {0, 1});
    request(1, gpu_bit(0));
    request(2, gpu_bit(0));
    advance(policy::kStartupWindow);
    EXPECT_TRUE(holds(2)) << "GPU 0 is in auto mode";
    release(1, gpu_bit(0));
    release(2, gpu_bit(0));
    actions();
    request(1, gpu_bit(1));
    request(2, gpu_bit(1));
    EXPECT_FALSE(holds(2)) << "GPU 1 is on";
    EXPECT_EQ(actions(), (V{"G1", "C1"}));
    advance(2s);
    EXPECT_EQ(actions(), V{"D1"}) << "after GPU 1's own quantum";
    // Following the host again.
    s_.set_gpu_time_quantum("GPU-1", std::nullopt, now_);
    s_.set_gpu_mode("GPU-1", std::nullopt, now_);
    EXPECT_EQ(s_.time_quantum_of(1), 30s);
    EXPECT_EQ(s_.mode_of(1), Mode::Auto);
}

TEST_F(PolicyTest, SettingsForAGpuNotYetSeenApplyWhenItComes)
{
    s_.set_gpu_mode("GPU-0", Mode::Off, now_);
    gpus(1);
    EXPECT_EQ(s_.mode_of(0), Mode::Off);
    client(1);
    client(2);
    request(1);
    request(2);
    EXPECT_EQ(actions(), (V{"G1", "G2"})) << "off: no turns, no notices";
}

}  // namespace
