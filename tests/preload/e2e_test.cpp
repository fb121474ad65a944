// End-to-end: real nvshared processes, test clients under libnvshare.so and
// the fake libcuda, checked from outside through the fake's event log and
// nvshared's status.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "common/protocol.h"
#include "preload/swap/tuning.h"
#include "tests/preload/clients.h"
#include "tests/preload/fake_log.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace nvshare::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace tuning = nvshare::preload::tuning;

// What a holder's debug log says once it has made the host memory for its
// next swap-out ahead.
constexpr const char* kMadeAhead = "host memory for the next swap-out from GPU 0 is ready";

// Whether the test runs at the speed its timings assume. Under ThreadSanitizer
// the library's threads run 5 to 15 times slower (one holder spent 1.3 s
// faulting in host memory it makes in 0.1 s otherwise), so a 300 ms hold or
// pause no longer falls where the test puts it, and which switch copies what
// is left to chance. There the swap engine's tests check what must hold at
// any speed (every byte of data, no fault, kernels never overlap, no race);
// the shape of a switch (what overlaps, what was made ahead, that a swap-in
// happened at all) is checked by the normal and ASan passes.
constexpr bool kTimingsHold =
#if defined(__SANITIZE_THREAD__)
    false;
#else
    true;
#endif

// Two clients that set up (register, allocate, report memory), wait at a
// barrier, and are released together, so their GPU work would overlap unless
// the library keeps them apart.
struct Pair {
    Process a, b;
};

Pair run_pair(const TempDir& dir, const std::string& socket, ClientRun run,
              const std::function<void()>& before_go = {})
{
    run.args.push_back("--barrier");
    run.args.push_back(dir / "go");
    Pair p{start_client(dir, socket, run, "a"), start_client(dir, socket, run, "b")};
    const bool ready = wait_until([&] {
        return file_exists(dir / ("go." + std::to_string(p.a.pid()))) &&
               file_exists(dir / ("go." + std::to_string(p.b.pid())));
    });
    EXPECT_TRUE(ready) << p.a.out() << p.a.err() << p.b.out() << p.b.err();
    if (before_go)
        before_go();
    touch(dir / "go");
    return p;
}

int count_lines_containing(const std::string& text, const std::string& needle)
{
    int n = 0;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos)
            end = text.size();
        n += text.substr(start, end - start).find(needle) != std::string::npos;
        start = end + 1;
    }
    return n;
}

// `timeout`: longer where the sanitizer builds make the fake's copies slow
// (under TSan a swap of a few hundred MiB takes seconds).
// Waits until `p` has launched a kernel (so it has held the GPU).
bool launched_one(const TempDir& dir, const Process& p)
{
    return wait_until(
        [&] { return count_events(dir / "fake.log", p.pid(), "cuLaunchKernel") >= 1; });
}

// ---- routes: every way a program reaches the driver is gated --------------------

struct RouteCase {
    const char* name;
    std::vector<std::string> args;
    bool dl_client;
    const char* kernel;  // the driver export the kernels must reach
};

void PrintTo(const RouteCase& c, std::ostream* os)
{
    *os << c.name;
}

class Routes : public testing::TestWithParam<RouteCase> {};

TEST_P(Routes, SerializeInOnModeAndRewriteAllocations)
{
    const RouteCase& c = GetParam();
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    ClientRun run{c.args, {}, c.dl_client};
    for (const char* a : {"--kernels", "4", "--kernel-us", "30000", "--alloc", "1M", "--copies"})
        run.args.push_back(a);
    Pair p = run_pair(dir, daemon.socket(), run);
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);

    const auto work = read_work(dir / "fake.log");
    EXPECT_FALSE(overlapped(work, p.a.pid(), p.b.pid())) << read_text(dir / "fake.log");
    for (pid_t pid : {p.a.pid(), p.b.pid()}) {
        int kernels = 0;
        for (const Work& w : work_of(work, pid))
            kernels += w.name.find(c.kernel) != std::string::npos;
        EXPECT_GE(kernels, 4) << "kernels through " << c.kernel;
        // cuMemAlloc became a block of a slab of swappable memory.
        EXPECT_GE(count_events(dir / "fake.log", pid, "alloc vmm 8388608"), 1);
        EXPECT_EQ(count_events(dir / "fake.log", pid, "alloc managed"), 0);
        EXPECT_EQ(count_events(dir / "fake.log", pid, "alloc device"), 0);
    }
}

INSTANTIATE_TEST_SUITE_P(
    E2E, Routes,
    testing::Values(
        RouteCase{"direct", {"--route", "direct"}, false, "cuLaunchKernel"},
        RouteCase{"direct_ptsz", {"--route", "direct", "--ptsz"}, false, "cuLaunchKernel_ptsz"},
        RouteCase{
            "direct_ex", {"--route", "direct", "--ex", "--stream"}, false, "cuLaunchKernelEx"},
        RouteCase{"dlsym", {"--route", "dlsym"}, true, "cuLaunchKernel"},
        RouteCase{"dlsym_ptsz", {"--route", "dlsym", "--ptsz"}, true, "cuLaunchKernel_ptsz"},
        RouteCase{"proc", {"--route", "proc", "--prefetch"}, true, "cuLaunchKernel"},
        RouteCase{
            "proc_ptsz", {"--route", "proc", "--ptsz", "--prefetch"}, true, "cuLaunchKernel_ptsz"},
        RouteCase{
            "proc_ex_ptsz", {"--route", "proc", "--ex", "--ptsz"}, true, "cuLaunchKernelEx_ptsz"},
        RouteCase{"proc_linked", {"--route", "proc", "--stream"}, false, "cuLaunchKernel"},
        RouteCase{"graph", {"--route", "proc", "--graph"}, true, "cuGraphLaunch:cuLaunchKernel"}),
    [](const testing::TestParamInfo<RouteCase>& p) { return std::string(p.param.name); });

// cuGetProcAddress hands back the wrapper of exactly the variant the driver
// chose for the caller's version and flags (the fake logs which it ran).
TEST(ProcAddress, KeepsTheDriversVariantChoice)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    for (bool ptsz : {false, true}) {
        ClientRun run{{"--route", "proc", "--prefetch", "--kernels", "1"}, {}, true};
        if (ptsz)
            run.args.push_back("--ptsz");
        Process p = start_client(dir, daemon.socket(), run, ptsz ? "ptsz" : "legacy");
        expect_clean_exit(p);
        const std::string log = dir / "fake.log";
        const std::string s = ptsz ? "_ptsz stream=" : " stream=";
        EXPECT_EQ(count_events(log, p.pid(), "cuMemPrefetchAsync"), 4);         // 2 starts, 2 ends
        EXPECT_EQ(count_events(log, p.pid(), "cuMemPrefetchAsync" + s), 1);     // CUDA 8.0 ABI
        EXPECT_EQ(count_events(log, p.pid(), "cuMemPrefetchAsync_v2" + s), 1);  // 12.2 ABI
    }
}

// The fake and the overlap check are honest: without the library's gate the
// same pair does overlap.
TEST(Honesty, WithoutTheLibraryWorkOverlaps)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    ClientRun run{{"--kernels", "8", "--kernel-us", "50000", "--alloc", "1M"},
                  {{"NVSHARE_DISABLE", "1"}},
                  false};
    Pair p = run_pair(dir, daemon.socket(), run);
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    EXPECT_TRUE(overlapped(read_work(dir / "fake.log"), p.a.pid(), p.b.pid()));
    // A pass-through: plain device memory, and nvshared never heard of them.
    EXPECT_EQ(count_events(dir / "fake.log", p.a.pid(), "alloc device 1048576"), 1);
    EXPECT_EQ(daemon.log().find("registered"), std::string::npos) << daemon.log();
}

// ---- modes ------------------------------------------------------------------------

TEST(Modes, OffRunsConcurrently)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "off"});
    Pair p =
        run_pair(dir, daemon.socket(), {{"--kernels", "8", "--kernel-us", "50000"}, {}, false});
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    EXPECT_TRUE(overlapped(read_work(dir / "fake.log"), p.a.pid(), p.b.pid()));
}

TEST(Modes, AutoRunsConcurrentlyWhenMemoryFits)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "4G"});
    // Long enough to outlast the first one's start (policy::kStartupSettle).
    Pair p = run_pair(dir, daemon.socket(),
                      {{"--kernels", "16", "--kernel-us", "50000", "--alloc", "1G"}, {}, false});
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    EXPECT_TRUE(overlapped(read_work(dir / "fake.log"), p.a.pid(), p.b.pid()));
}

TEST(Modes, AutoSerializesWhenOversubscribed)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    Pair p =
        run_pair(dir, daemon.socket(),
                 {{"--kernels", "4", "--kernel-us", "30000", "--alloc", "700M"}, {}, false}, [&] {
                     // Both memory reports arrived: together they exceed the capacity.
                     EXPECT_TRUE(wait_until([&] {
                         const auto s = daemon.status();
                         return !s.is_null() && s["gpus"].size() == 1 &&
                                s["gpus"][0]["requested_memory"].get<uint64_t>() >= 1400ull << 20;
                     })) << daemon.status().dump();
                 });
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    // The programs' kernels: a process that let go copies its memory out
    // beside the next holder's work (the switch's copies overlap it).
    EXPECT_FALSE(
        overlapped(work_named(read_work(dir / "fake.log"), "cuLaunch"), p.a.pid(), p.b.pid()))
        << read_text(dir / "fake.log") << p.a.err() << p.b.err();
}

// ---- giving the lock back -----------------------------------------------------------

// A busy holder is asked to drop at the end of its quantum and lets the
// waiter run; it is never revoked.
TEST(Release, DropsAtTheEndOfTheTimeQuantum)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "300ms", "--grace", "10s"});
    const std::string stop = dir / "stop";
    // No early release: only the quantum's drop request may take the lock.
    Process a = start_client(
        dir, daemon.socket(),
        {{"--kernels", "2", "--until", stop}, {{"NVSHARE_IDLE_RELEASE_MS", "0"}}, false}, "a");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    Process b = start_client(dir, daemon.socket(), {{"--kernels", "3"}, {}, false}, "b");
    EXPECT_EQ(b.wait(seconds(30)), 0) << b.out() << b.err();
    EXPECT_TRUE(a.running()) << "b ran only after a finished";
    const auto me = Daemon::client_by_pid(daemon.status(), a.pid());
    touch(stop);
    expect_clean_exit(a);
    EXPECT_FALSE(overlapped(read_work(dir / "fake.log"), a.pid(), b.pid()));
    ASSERT_FALSE(me.is_null());
    EXPECT_GE(me["drops"].get<int>(), 1);
    EXPECT_EQ(me["revocations"].get<int>(), 0);
}

// An idle holder hands the GPU on after the idle period, long before its
// quantum ends.
TEST(Release, ReleasesEarlyWhenIdle)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    const std::string stop = dir / "stop";
    Process a = start_client(dir, daemon.socket(),
                             {{"--kernels", "2", "--pause-until", stop}, {}, false}, "a");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    Process b = start_client(dir, daemon.socket(), {{"--kernels", "3"}, {}, false}, "b");
    EXPECT_EQ(b.wait(seconds(30)), 0) << b.out() << b.err();
    EXPECT_TRUE(a.running());
    const auto me = Daemon::client_by_pid(daemon.status(), a.pid());
    ASSERT_FALSE(me.is_null());
    EXPECT_EQ(me["drops"].get<int>(), 0) << "released on its own, not asked to";
    touch(stop);
    expect_clean_exit(a);
    EXPECT_FALSE(overlapped(read_work(dir / "fake.log"), a.pid(), b.pid()));
}

// A holder whose pauses have proved long lets go as soon as it is idle: its
// first pause waits the idle period (120 ms here), later ones less. This
// checks what the library decided for each pause (its debug log), not how
// long a loaded machine took to hand over; the rule is IdleGaps'
// (preload_unit_test.cpp: WithoutAHistoryWaitsTheSwitchCostOrThePeriod,
// LongPausesLetGoAfterTheFloor). Each pause lasts until the bursty one has
// let go in it and the hog has run, and at least 300 ms: one that ended
// as soon as the hog had run could be shorter than the idle period (a hold
// of 10 ms, a kernel of the hog's, a loaded machine's latencies) and so
// count as a short pause, which makes the next hold the idle period again.
// (Bursts of 300 ms: idle checks come every period, so a burst of two
// periods is seen to end when it ends.) The quantum (2 s) only makes the hog
// hand over: a burst and the idle period fit in it with room for a loaded
// machine.
TEST(Release, LetsGoAtOnceOncePausesProveLong)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "2s"});
    const std::string stop = dir / "stop";
    Process hog =
        start_client(dir, daemon.socket(), {{"--kernels", "1", "--until", stop}, {}, false}, "hog");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", hog.pid(), "end") >= 2; }));
    const std::string pause = dir / "pause";
    Process bursty = start_client(
        dir, daemon.socket(),
        {{"--kernels", "2", "--kernel-us", "150000", "--rounds", "4", "--pauses-until", pause},
         {{"NVSHARE_IDLE_RELEASE_MS", "120"}, {"NVSHARE_DEBUG", "1"}},
         false},
        "bursty");
    for (int n = 1; n < 4; ++n) {
        // Pause n: it let go, and the hog ran a kernel since.
        ASSERT_TRUE(wait_until([&] {
            return count_lines_containing(bursty.err(), "released early") >= n;
        })) << bursty.err();
        const int ran = count_events(dir / "fake.log", hog.pid(), "end");
        ASSERT_TRUE(
            wait_until([&] { return count_events(dir / "fake.log", hog.pid(), "end") > ran; }));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        touch(pause + "." + std::to_string(n));
    }
    expect_clean_exit(bursty);
    touch(stop);
    expect_clean_exit(hog);
    ASSERT_EQ(bursty.err().find("released after a drop request"), std::string::npos)
        << "a drop, not the idle rule, ended a hold:\n"
        << bursty.err();
    const auto work = read_work(dir / "fake.log");
    const auto mine = work_of(work, bursty.pid());
    const auto theirs = work_of(work, hog.pid());
    ASSERT_EQ(mine.size(), 8u) << read_text(dir / "fake.log");
    // It let go in every pause between its bursts: the hog ran there.
    for (size_t burst = 0; burst + 1 < 4; ++burst)
        EXPECT_TRUE(std::any_of(theirs.begin(), theirs.end(),
                                [&](const Work& w) {
                                    return w.start >= mine[2 * burst + 1].end &&
                                           w.end <= mine[2 * burst + 2].start;
                                }))
            << "pause " << burst << "\n"
            << read_text(dir / "fake.log");
    // What the library decided for each pause (not how fast a loaded
    // machine carried it out): the idle period first, then less, once its
    // pauses have shown they outlast it.
    const auto kept = numbers_after(bursty.err(), "(kept it idle up to ", "released early");
    ASSERT_GE(kept.size(), 3u) << bursty.err();  // and maybe after the last burst
    EXPECT_EQ(kept[0], 120u) << "the first pause waits the idle period\n" << bursty.err();
    EXPECT_LT(kept[1], 120u) << "then a pause is known to outlast it\n" << bursty.err();
    EXPECT_LT(kept[2], 120u) << bursty.err();
    EXPECT_FALSE(overlapped(work, bursty.pid(), hog.pid()));
}

// Two bursty clients take turns on an oversubscribed GPU (their data moves
// at each turn). A client that lets go in a pause asks for the GPU again
// only when its work resumes, and the pause is timed from when its work ran
// out: a wish for the lock left from the grant's swap-in (the program's
// calls waited at the gate and asked again) once made it ask at once,
// mid-pause, so that every pause read as none and its holds never learnt
// that the pauses are long. When the pause began, when to let go and that
// the wish goes are idle_release's (idle_release_test.cpp: the race that
// leaves the wish is not reliably provoked here). This checks the path:
// data intact, pauses it let go in and asked again after, and holds that
// learnt of its long pauses (its debug log). Copies take 150 ms a chunk
// here, so that a swap-in (four chunks) can outlast the 200 ms after which
// a call waiting at the gate asks again. Each client runs six rounds and
// more until both logs show what is checked (at most 120 s; the checks then
// fail), so that a loaded machine's slow rounds only make the test longer.
TEST(Release, AsksAgainOnlyWhenItsWorkResumes)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "512M"});
    const std::string stop = dir / "stop";
    Pair p = run_pair(dir, daemon.socket(),
                      {{"--kernels", "2", "--kernel-us", "150000", "--rounds", "6", "--pause-ms",
                        "700", "--alloc", "350M", "--check-data", "--until", stop},
                       {{"NVSHARE_DEBUG", "1"}, {"FAKECUDA_COPY_US", "150000"}},
                       false});
    const auto learnt = [](const Process& c) {
        const std::string err = c.err();
        return err.find("work resumed after a pause of ") != std::string::npos &&
               err.find("longer pauses seen") != std::string::npos;
    };
    // What the logs show is checked below.
    (void)wait_until([&] { return learnt(p.a) && learnt(p.b); }, seconds(120));
    touch(stop);
    expect_clean_exit(p.a, seconds(240));
    expect_clean_exit(p.b, seconds(240));
    for (Process* c : {&p.a, &p.b}) {
        EXPECT_NE(c->out().find("data=ok"), std::string::npos) << c->out() << c->err();
        EXPECT_NE(c->err().find("work resumed after a pause of "), std::string::npos) << c->err();
        EXPECT_NE(c->err().find("longer pauses seen"), std::string::npos) << c->err();
    }
}

// On a GPU of `capacity` (auto mode, a long quantum): a holder of `alloc`
// with bursts of two 20 ms kernels `pause_ms` apart (`env` added to its
// environment, NVSHARE_DEBUG=1 among it) and, once its first kernel ended,
// another client of `alloc` with two kernels. The holder has at least
// `rounds` bursts, and more until its log shows `until_logged` (at most 30
// s; the checks then fail): however long the other takes to register on a
// loaded machine, the holder still pauses while it waits. Both end cleanly.
struct PausesRun {
    std::string holder_err;
    // From the holder's debug log: the hold it chose as each pause began
    // and its share of a switch then; the idle time and hold of each early
    // release.
    std::vector<uint64_t> hold, hold_share, released_idle, released_hold;
};

PausesRun run_holder_with_pauses(const std::string& capacity, const std::string& alloc,
                                 const std::string& rounds, const std::string& pause_ms,
                                 const std::map<std::string, std::string>& env,
                                 const std::string& until_logged)
{
    TempDir dir;
    Daemon daemon(dir,
                  {"--anti-thrashing", "auto", "--capacity", capacity, "--time-quantum", "10min"});
    const std::string stop = dir / "stop";
    Process holder = start_client(dir, daemon.socket(),
                                  {{"--alloc", alloc, "--kernels", "2", "--rounds", rounds,
                                    "--pause-ms", pause_ms, "--until", stop},
                                   env,
                                   false},
                                  "holder");
    EXPECT_TRUE(
        wait_until([&] { return count_events(dir / "fake.log", holder.pid(), "end") >= 1; }));
    Process other = start_client(dir, daemon.socket(),
                                 {{"--alloc", alloc, "--kernels", "2"}, {}, false}, "other");
    // What the log shows is the caller's to check.
    (void)wait_until([&] { return holder.err().find(until_logged) != std::string::npos; },
                     seconds(30));
    touch(stop);
    expect_clean_exit(holder);
    expect_clean_exit(other);
    PausesRun run;
    run.holder_err = holder.err();
    const std::string& err = run.holder_err;
    run.hold = numbers_after(err, "idle: keeping the GPU up to ");
    run.hold_share = numbers_after(err, "(our share of a switch ", "idle: keeping the GPU");
    run.released_idle = numbers_after(err, "released early: idle for ");
    run.released_hold = numbers_after(err, "(kept it idle up to ", "released early");
    EXPECT_EQ(run.hold.size(), run.hold_share.size()) << err;
    EXPECT_EQ(run.released_idle.size(), run.released_hold.size()) << err;
    // It let go only once a pause had outlasted its hold.
    for (size_t i = 0; i < run.released_idle.size() && i < run.released_hold.size(); ++i)
        EXPECT_GE(run.released_idle[i], run.released_hold[i]) << err;
    return run;
}

// On an oversubscribed GPU a holder whose pauses (20 ms) are shorter than a
// switch would cost holds the GPU through them: before any pause is known
// its hold is its share of a switch, not the 1 ms idle period; moving 4 GiB
// out costs at least 107 ms at the assumed 40 GB/s (more while host memory
// for it is still to be made; the way back overlaps the next holder's
// copies, so it does not add). This checks the hold the library chose (its
// debug log); the rules: IdleGaps (preload_unit_test.cpp), the share
// (switch_share_test.cpp), when to look and let go (idle_release_test.cpp).
TEST(Release, HoldsThroughPausesShorterThanASwitch)
{
    const PausesRun run = run_holder_with_pauses(
        "12G", "8G", "15", "20", {{"NVSHARE_DEBUG", "1"}, {"NVSHARE_IDLE_RELEASE_MS", "1"}},
        "idle: keeping the GPU up to ");
    // Under TSan a 20 ms pause may pass before the library looks: the path
    // (both end cleanly, releases only after a pause outlasted the hold) is
    // checked, the hold chosen is not.
    if (!kTimingsHold)
        return;
    ASSERT_FALSE(run.hold.empty()) << run.holder_err;
    EXPECT_EQ(run.hold[0], run.hold_share[0]) << run.holder_err;
    EXPECT_GE(run.hold_share[0], 107u) << run.holder_err;
}

// An idle holder waits out its own share of a switch before it lets go, not
// the whole round trip (the share's rule: switch_share_test.cpp). Here 512
// of 768 MiB each: 280 MiB move (256 MiB room for the other, less a 24 MiB
// headroom), a few ms at the assumed rates, more while host memory for it is
// still to be made; its 300 ms pauses outlast that. This checks the path:
// it let go, and its first release (before any pause was known) waited out
// exactly its share (its debug log).
TEST(Release, WaitsOutItsOwnShareOfASwitchBeforeLettingGo)
{
    const PausesRun run = run_holder_with_pauses(
        "768M", "512M", "3", "300", {{"NVSHARE_DEBUG", "1"}, {"NVSHARE_IDLE_RELEASE_MS", "1"}},
        "released early");
    const auto share = numbers_after(run.holder_err, "our share of a switch ", "released early");
    ASSERT_FALSE(run.released_hold.empty()) << run.holder_err;
    ASSERT_EQ(share.size(), run.released_hold.size()) << run.holder_err;
    EXPECT_GT(share[0], 0u) << run.holder_err;
    EXPECT_EQ(run.released_hold[0], share[0]) << run.holder_err;
}

// nvshared counts the next holder's memory as far as it has allocated (256
// of its 384 MiB here, so 256 of the 512 could stay, less the 16 MiB
// headroom); the holder's swap-out leaves that much (three of its six 64 MiB
// chunks move), and gives the rest when nvshared asks for room for the next
// holder's late allocation (Shrink: two more chunks), which then succeeds.
// The holder lives on after its work until it has given that room.
TEST(Release, LeavesWhatNvsharedAllowsAndGivesMoreRoomWhenAsked)
{
    TempDir dir;
    Daemon daemon(dir,
                  {"--anti-thrashing", "auto", "--capacity", "512M", "--time-quantum", "300ms"});
    const std::string stop = dir / "stop";
    Process holder = start_client(dir, daemon.socket(),
                                  {{"--alloc", "384M", "--kernels", "2", "--pause-until", stop},
                                   {{"NVSHARE_DEBUG", "1"}, {"NVSHARE_IDLE_RELEASE_MS", "0"}},
                                   false},
                                  "holder");
    ASSERT_TRUE(
        wait_until([&] { return count_events(dir / "fake.log", holder.pid(), "end") >= 1; }));
    Process starting = start_client(
        dir, daemon.socket(),
        {{"--alloc", "256M", "--kernels", "1", "--late-alloc", "128M"}, {}, false}, "starting");
    expect_clean_exit(starting);
    // The holder gives the room asked for after it let go (each process has
    // a fake device of its own: the late allocation does not wait for it).
    EXPECT_TRUE(wait_until([&] {
        const std::string err = holder.err();
        const size_t asked = err.find("nvshared asks for room");
        return asked != std::string::npos && err.find("swapped out ", asked) != std::string::npos;
    })) << holder.err();
    touch(stop);
    expect_clean_exit(holder);
    EXPECT_NE(starting.out().find("late=ok"), std::string::npos) << starting.out();
    const std::string err = holder.err();
    const auto swapped = numbers_after(err, "swapped out ");
    ASSERT_FALSE(swapped.empty()) << err;
    // Taking the next holder to be as big as the holder moved five chunks
    // at the switch.
    EXPECT_EQ(swapped.front(), 192ull << 20) << err;
    uint64_t later = 0;
    for (size_t i = 1; i < swapped.size(); ++i)
        later += swapped[i];
    EXPECT_EQ(later, 128ull << 20) << err;
    EXPECT_NE(err.find("nvshared asks for room"), std::string::npos) << err;
}

// A holder that stops answering (stopped by a signal) loses the lock after
// the grace period; the waiter runs; the holder carries on when resumed.
TEST(Release, RevokesAClientThatStopsAnswering)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "200ms", "--grace", "300ms"});
    const std::string stop = dir / "stop";
    Process a =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "2", "--kernel-us", "10000", "--until", stop}, {}, false}, "a");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    a.signal(SIGSTOP);
    Process b = start_client(dir, daemon.socket(),
                             {{"--kernels", "3", "--kernel-us", "10000"}, {}, false}, "b");
    EXPECT_EQ(b.wait(seconds(30)), 0) << b.out() << b.err();
    const auto me = Daemon::client_by_pid(daemon.status(), a.pid());
    a.signal(SIGCONT);
    touch(stop);
    expect_clean_exit(a);
    ASSERT_FALSE(me.is_null());
    EXPECT_GE(me["revocations"].get<int>(), 1);
    // The true cause (issue 16), from the daemon's RevokeCause frame.
    EXPECT_NE(a.err().find("revoked the GPU lock: not released within the grace period"),
              std::string::npos)
        << a.err();
}

// ---- telling a waiting process why it waits (issue 16) -----------------------------

// The first line of `text` that contains `needle`, or "".
std::string line_containing(const std::string& text, const std::string& needle)
{
    const size_t at = text.find(needle);
    if (at == std::string::npos)
        return {};
    const size_t start = text.rfind('\n', at);
    const size_t end = text.find('\n', at);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    return text.substr(from, (end == std::string::npos ? text.size() : end) - from);
}

// A holder that keeps the GPU after its work (no early release) until
// `release` exists, once it holds it.
Process start_holder(const TempDir& dir, const Daemon& daemon, const std::string& release,
                     std::vector<std::string> extra = {})
{
    std::vector<std::string> args{"--kernels", "2", "--pause-until", release};
    args.insert(args.end(), extra.begin(), extra.end());
    Process a = start_client(dir, daemon.socket(),
                             {args, {{"NVSHARE_IDLE_RELEASE_MS", "0"}}, false}, "holder");
    EXPECT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    return a;
}

bool is_waiting(const Daemon& daemon, pid_t pid)
{
    const auto me = Daemon::client_by_pid(daemon.status(), pid);
    return !me.is_null() && me["state"] == "waiting";
}

// Whether `p` announces on stderr that it waits for GPU 0 (bounded wait).
bool announced_a_wait(const Process& p)
{
    return wait_until([&] { return p.err().find("waiting for GPU 0 (") != std::string::npos; });
}

// Two processes wait behind a holder in `on` mode: after the notice delay
// each prints one line naming the holder (pid, command, user), its own
// place and the reason, and one line when it gets the GPU.
TEST(WaitNotice, NamesTheHolderThePlaceAndTheReason)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    const std::string release = dir / "release";
    Process a = start_holder(dir, daemon, release);
    const auto holder = Daemon::client_by_pid(daemon.status(), a.pid());
    ASSERT_FALSE(holder.is_null());
    const ClientRun waiter{
        {"--kernels", "2", "--kernel-us", "10000"}, {{"NVSHARE_WAIT_NOTICE_MS", "500"}}, false};
    Process b = start_client(dir, daemon.socket(), waiter, "b");
    ASSERT_TRUE(wait_until([&] { return is_waiting(daemon, b.pid()); }));
    Process c = start_client(dir, daemon.socket(), waiter, "c");
    EXPECT_TRUE(announced_a_wait(b) && announced_a_wait(c)) << b.err() << c.err();
    touch(release);
    expect_clean_exit(a);
    expect_clean_exit(b);
    expect_clean_exit(c);

    const std::string held_by = "held by pid " + std::to_string(a.pid()) + " (" +
                                holder["comm"].get<std::string>() + ", user root) for ";
    for (auto [p, place] : {std::pair{&b, "; 1st in line; "}, std::pair{&c, "; 2nd in line; "}}) {
        const std::string err = p->err();
        EXPECT_EQ(count_lines_containing(err, "waiting for GPU 0 ("), 1) << err;
        const std::string line = line_containing(err, "waiting for GPU 0 (");
        EXPECT_EQ(line.rfind("[nvshare] pid " + std::to_string(p->pid()) + ": ", 0), 0u) << line;
        EXPECT_NE(line.find(held_by), std::string::npos) << line;
        EXPECT_NE(line.find(" of its 600.0 s quantum"), std::string::npos) << line;
        EXPECT_NE(line.find(place), std::string::npos) << line;
        EXPECT_NE(line.find("why: mode on, processes take turns"), std::string::npos) << line;
        EXPECT_EQ(count_lines_containing(err, "got GPU 0 after "), 1) << err;
        EXPECT_LT(err.find("waiting for GPU"), err.find("got GPU")) << err;
    }
}

// b (a delay of 0) waits behind the holder while c, which came after it
// with the default delay, waits long enough to announce its wait.
TEST(WaitNotice, ZeroDelayMeansNever)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    const std::string release = dir / "release";
    Process a = start_holder(dir, daemon, release);
    Process b = start_client(
        dir, daemon.socket(),
        {{"--kernels", "2", "--kernel-us", "10000"}, {{"NVSHARE_WAIT_NOTICE_MS", "0"}}, false},
        "b");
    ASSERT_TRUE(wait_until([&] { return is_waiting(daemon, b.pid()); }));
    Process c = start_client(dir, daemon.socket(),
                             {{"--kernels", "2", "--kernel-us", "10000"}, {}, false}, "c");
    EXPECT_TRUE(announced_a_wait(c)) << c.err();
    touch(release);
    expect_clean_exit(a);
    expect_clean_exit(b);
    expect_clean_exit(c);
    EXPECT_EQ(b.err().find("[nvshare]"), std::string::npos) << b.err();
}

// In auto mode the waiter learns that the GPU's memory is oversubscribed.
TEST(WaitNotice, OversubscriptionIsTheReasonInAutoMode)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G", "--time-quantum", "10min"});
    const std::string release = dir / "release";
    Process a = start_holder(dir, daemon, release, {"--alloc", "700M"});
    Process b = start_client(dir, daemon.socket(),
                             {{"--kernels", "2", "--kernel-us", "10000", "--alloc", "700M"},
                              {{"NVSHARE_WAIT_NOTICE_MS", "500"}},
                              false},
                             "b");
    EXPECT_TRUE(announced_a_wait(b)) << b.err();
    touch(release);
    expect_clean_exit(a);
    expect_clean_exit(b);
    const std::string line = line_containing(b.err(), "waiting for GPU 0 (");
    EXPECT_NE(line.find("why: its memory is oversubscribed, processes take turns"),
              std::string::npos)
        << b.err();
    EXPECT_NE(line.find("held by pid " + std::to_string(a.pid())), std::string::npos) << line;
}

// Issue 20. A drop arrives while queued work waits on a flag that this
// process writes only later: the drain's synchronisation cannot finish until
// that write is submitted. The writing thread reaches the closed gate while
// the drain is under way; it must get past the gate once the grace period
// is over (not block on a lock the drain holds), so that the work completes,
// the drain ends and the process lives on.
// The most submissions of `pid` queued on the fake GPU and not yet started,
// at any point of the fake's log.
int most_queued_ahead(const std::string& log, pid_t pid)
{
    std::istringstream in(read_text(log));
    std::string line;
    int queued = 0, most = 0;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        uint64_t ns = 0;
        pid_t who = 0;
        std::string event;
        if (!(f >> ns >> who >> event) || who != pid)
            continue;
        if (event == "queue")
            most = std::max(most, ++queued);
        else if (event == "start")
            --queued;
    }
    return most;
}

// Issue 14: a batch holder of a GPU taken in turns, with an interactive
// process registered there, keeps only a few kernels queued, so that it can
// let go within a few kernels; without the interactive process it queues
// its whole burst at once.
TEST(Priority, ALowerClassHolderKeepsItsQueuedWorkShort)
{
    const ClientRun batch{{"--kernels", "30"}, {{"NVSHARE_PRIORITY", "batch"}}, false};
    int alone = 0;
    {
        TempDir dir;
        Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
        Process a = start_client(dir, daemon.socket(), batch, "a");
        expect_clean_exit(a);
        alone = most_queued_ahead(dir / "fake.log", a.pid());
    }
    EXPECT_GE(alone, 20) << "the check itself must see a burst queued at once";

    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    // Registered (it allocates), never asks for the GPU.
    const std::string stop = dir / "stop";
    Process i = start_client(dir, daemon.socket(),
                             {{"--kernels", "0", "--alloc", "1M", "--pause-until", stop},
                              {{"NVSHARE_PRIORITY", "interactive"}},
                              false},
                             "i");
    ASSERT_TRUE(
        wait_until([&] { return !Daemon::client_by_pid(daemon.status(), i.pid()).is_null(); }));
    Process a = start_client(dir, daemon.socket(), batch, "a");
    expect_clean_exit(a);
    EXPECT_LE(most_queued_ahead(dir / "fake.log", a.pid()), 6) << read_text(dir / "fake.log");
    EXPECT_EQ(count_events(dir / "fake.log", a.pid(), "end"), 30) << "all its work ran";
    touch(stop);
    expect_clean_exit(i);
}

TEST(Release, DrainWaitingOnALaterSubmissionDoesNotHang)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "200ms", "--grace", "1s"});
    const std::string write = dir / "write";
    Process a = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--kernel-us", "10000", "--wait-flag", write},
                              {{"NVSHARE_DEBUG", "1"}, {"NVSHARE_IDLE_RELEASE_MS", "0"}},
                              false},
                             "a");
    ASSERT_TRUE(wait_until([&] { return a.out().find("waiting=ok") != std::string::npos; }))
        << a.out() << a.err();
    Process b = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--kernel-us", "10000"}, {}, false}, "b");
    // The drain has begun (and is stuck on the wait): now the write comes.
    ASSERT_TRUE(wait_until([&] { return a.err().find("draining") != std::string::npos; }))
        << a.err();
    touch(write);
    EXPECT_EQ(a.wait(seconds(60)), 0) << "the process hung:\n" << a.out() << a.err();
    EXPECT_NE(a.out().find("flag=ok"), std::string::npos) << a.out();
    expect_clean_exit(b);
}

// Issue 43 (items 1-3). A holder's queued work waits for a flag that it
// writes only after an allocation that finds the GPU full of another's
// memory (b, idle, keeps 384 of the device's 512 MiB). The drain before the
// room is made (mode on: the holder waits for room) or before it lets go
// for room (auto: a shared grant) cannot end until the write: past the
// drain's deadline the work goes through, on memory mapped first (the
// allocation's chunks in host memory), so the process neither hangs nor
// touches an unmapped address; the room then comes and the data is kept.
void expect_a_flag_waited_for_across_a_full_gpu(const char* mode)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", mode, "--capacity", "512M", "--time-quantum", "200ms"});
    const std::map<std::string, std::string> device{{"FAKECUDA_SHARED_DEVICE", dir / "device"},
                                                    {"FAKECUDA_MEMORY", std::to_string(512 << 20)}};
    const std::string stop = dir / "stop", go = dir / "go";
    Process b = start_client(
        dir, daemon.socket(),
        {{"--alloc", "384M", "--kernels", "1", "--kernel-us", "10000", "--pause-until", stop},
         device,
         false},
        "b");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", b.pid(), "end") >= 1; }));
    touch(go);
    std::map<std::string, std::string> env = device;
    env["NVSHARE_DEBUG"] = "1";
    Process a = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--kernel-us", "10000", "--wait-flag", go,
                               "--alloc-while-flag-waits", "256M"},
                              env,
                              false},
                             "a");
    EXPECT_EQ(a.wait(seconds(60)), 0) << "the process hung or failed:\n" << a.out() << a.err();
    EXPECT_NE(a.out().find("more=ok"), std::string::npos) << a.out() << a.err();
    EXPECT_NE(a.out().find("flag=ok"), std::string::npos) << a.out();
    EXPECT_NE(a.err().find("GPU work goes through unscheduled meanwhile"), std::string::npos)
        << a.err();  // the path under test was taken
    EXPECT_EQ(count_events(dir / "fake.log", a.pid(), " fault "), 0) << read_text(dir / "fake.log");
    touch(stop);
    expect_clean_exit(b);
}

TEST(Drain, AFlagWrittenAfterAnAllocationThatWaitsForRoomNeitherHangsNorFaults)
{
    expect_a_flag_waited_for_across_a_full_gpu("on");
}

TEST(Drain, AFlagWrittenAfterAnAllocationThatLetsGoForRoomNeitherHangsNorFaults)
{
    expect_a_flag_waited_for_across_a_full_gpu("auto");
}

// Issue 43 (items 3 and 4): a process that let go while its work still runs
// is asked for room by the next holder (Shrink) and moves nothing until that
// work has ended. Its kernels wait behind a flag written only after a
// stream capture (during which nothing may synchronise, so at the end of
// the grace it let go with its memory where it was); the capture lasts
// until the Shrink has come. The kernels touch every page of the memory as
// they run, so memory moved under them faults. Before, a Shrink moved the
// memory at once.
TEST(Shrink, MovesNothingUnderWorkThatStillRuns)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--capacity", "1G", "--time-quantum", "100ms",
                        "--grace", "200ms"});
    const std::map<std::string, std::string> device{{"FAKECUDA_SHARED_DEVICE", dir / "device"},
                                                    {"FAKECUDA_MEMORY", std::to_string(1 << 30)},
                                                    {"NVSHARE_IDLE_RELEASE_MS", "0"},
                                                    {"NVSHARE_DEBUG", "1"}};
    const std::string end_capture = dir / "end-capture";
    Process a = start_client(dir, daemon.socket(),
                             {{"--alloc", "600M", "--touch", "--kernels", "3", "--kernel-us",
                               "10000", "--capture-until", end_capture, "--check-data"},
                              device,
                              false},
                             "a");
    ASSERT_TRUE(wait_until([&] { return a.out().find("capturing=ok") != std::string::npos; }))
        << a.out() << a.err();
    // Its memory stays where it is when it lets go; the late allocation
    // makes nvshared ask it for room.
    Process b =
        start_client(dir, daemon.socket(),
                     {{"--alloc", "300M", "--late-alloc", "500M", "--kernels", "1", "--check-data"},
                      device,
                      false},
                     "b");
    const bool asked = wait_until(
        [&] { return a.err().find("nvshared asks for room") != std::string::npos; }, seconds(60));
    // The capture lasts until the Shrink's drain has given up on it (ended
    // before, as on a slow TSan run, the drain would find no capture left).
    wait_until(
        [&] {
            return a.err().find("a stream capture runs: the room asked for waits for its end") !=
                   std::string::npos;
        },
        seconds(60));
    touch(end_capture);
    EXPECT_TRUE(asked) << a.err() << b.err();
    expect_clean_exit(a, seconds(60));
    expect_clean_exit(b, seconds(60));
    for (Process* p : {&a, &b}) {
        EXPECT_NE(p->out().find("data=ok"), std::string::npos) << p->out() << p->err();
        EXPECT_EQ(count_events(dir / "fake.log", p->pid(), " fault "), 0)
            << read_text(dir / "fake.log");
    }
    EXPECT_NE(a.err().find("a stream capture runs: the room asked for waits for its end"),
              std::string::npos)
        << a.err();
    // Its memory moved only once its kernels had run.
    const auto work = read_work(dir / "fake.log");
    const auto kernels = work_of(work_named(work, "cuLaunchKernel"), a.pid());
    ASSERT_EQ(kernels.size(), 3u) << read_text(dir / "fake.log");
    for (const Work& c : work_of(work_named(work, "cuMemcpyAsync"), a.pid()))
        EXPECT_GE(c.start, kernels.back().end)
            << "a copy of the swap engine ran before the kernels\n"
            << read_text(dir / "fake.log");
}

// Issue 43 (item 4, cuMemFree). A free of swappable memory that queued work
// still uses, while a stream captures (no synchronisation allowed): the
// memory stays mapped until that work has run, and is unmapped at the next
// wait for all the work. Before, it was unmapped at once and the queued
// memset faulted (the fake checks addresses as work runs).
TEST(Drain, AFreeDuringACaptureLeavesQueuedWorkItsMemory)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    Process a = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--free-during-capture"}, {}, false}, "a");
    expect_clean_exit(a);
    EXPECT_NE(a.out().find("free-during-capture=ok"), std::string::npos) << a.out() << a.err();
    EXPECT_EQ(count_events(dir / "fake.log", a.pid(), " fault "), 0) << read_text(dir / "fake.log");
}

// The same for a small allocation, a block of a slab: the slab stays mapped
// anyway, and the block stays taken until the next wait for all the work,
// so that an allocation made meanwhile does not get the memory that the
// queued memset still writes.
TEST(Drain, ABlockFreedDuringACaptureIsNotHandedOutAgainBeforeItsWorkRan)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    Process a = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--free-during-capture", "--alloc", "64K"}, {}, false}, "a");
    expect_clean_exit(a);
    EXPECT_NE(a.out().find("free-during-capture=ok"), std::string::npos) << a.out() << a.err();
    EXPECT_NE(a.out().find("reuse=ok"), std::string::npos) << a.out() << a.err();
    EXPECT_EQ(count_events(dir / "fake.log", a.pid(), " fault "), 0) << read_text(dir / "fake.log");
    EXPECT_EQ(count_events(dir / "fake.log", a.pid(), "alloc managed"), 0)
        << read_text(dir / "fake.log");
}

// Issue 20. A call admitted just before a drop may still be putting work on
// the GPU (here a graph launch that takes the driver 8 x 30 ms to submit)
// when the release comes: the release waits for it to leave the driver, so
// none of that work runs while the next holder does. `a` is inside the
// driver most of the time; another process comes to wait (and so makes it
// let go) until a's debug log shows a drop that found a call there.
TEST(Release, WaitsForCallsStillInsideTheDriver)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "100ms", "--grace", "10s"});
    const std::string stop = dir / "stop";
    Process a = start_client(
        dir, daemon.socket(),
        {{"--route", "proc", "--graph", "--kernels", "8", "--kernel-us", "1000", "--until", stop},
         {{"FAKECUDA_GRAPH_SUBMIT_US", "30000"}, {"NVSHARE_DEBUG", "1"}},
         true},
        "a");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    const auto found_inside = [&] {
        return a.err().find("a driver call admitted before the drop is still inside the driver") !=
               std::string::npos;
    };
    std::vector<pid_t> others;
    for (int i = 0; i < 5 && !found_inside(); ++i) {
        Process b = start_client(dir, daemon.socket(), {{"--kernels", "6"}, {}, false},
                                 "b" + std::to_string(i));
        EXPECT_EQ(b.wait(seconds(60)), 0) << b.out() << b.err();
        others.push_back(b.pid());
    }
    touch(stop);
    expect_clean_exit(a);
    EXPECT_TRUE(found_inside()) << a.err();
    const auto work = read_work(dir / "fake.log");
    for (const pid_t b : others)
        EXPECT_FALSE(overlapped(work, a.pid(), b)) << read_text(dir / "fake.log");
}

// Issue 13. A holder whose program is inside an allocation is not idle: the
// work that follows needs that memory. Here each of the holder's last three
// rounds begins with an allocation whose mapping takes 1 s, longer than
// its hold when idle (200 ms), and another process comes to wait meanwhile
// (not before: until then nothing can make the holder let go, so a loaded
// machine's gaps between its busy rounds cannot either). Letting go then (as
// it did on the GPU, in a torch job's check phase) cost a switch each way;
// it keeps the GPU to the end of its work, so the other's work all comes
// after its own. The idle period leaves room for the holder's own CPU
// between a kernel's end and the next round's call (tens of ms under TSan
// on a loaded machine: a real pause, where letting go is right).
// The holder (with an idle period of 200 ms) runs busy rounds until another
// process comes to wait, then three rounds that each begin with
// `round_start` (a call that keeps it 1 s through `slow_env`); the other's
// work must all come after its own: it never let go.
void expect_the_holder_keeps_the_gpu(const std::vector<std::string>& round_start,
                                     const std::string& slow_env)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    const std::string go = dir / "go";
    ClientRun run{
        {"--kernels", "1", "--busy-until", go, "--rounds", "4"},
        {{"NVSHARE_IDLE_RELEASE_MS", "200"}, {"NVSHARE_DEBUG", "1"}, {slow_env, "1000000"}},
        false};
    run.args.insert(run.args.end(), round_start.begin(), round_start.end());
    Process a = start_client(dir, daemon.socket(), run, "a");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    touch(go);
    Process b = start_client(dir, daemon.socket(),
                             {{"--kernels", "2", "--kernel-us", "10000"}, {}, false}, "b");
    expect_clean_exit(a);
    expect_clean_exit(b);
    const auto work = read_work(dir / "fake.log");
    const auto mine = work_of(work, a.pid());
    const auto theirs = work_of(work, b.pid());
    ASSERT_FALSE(mine.empty());
    ASSERT_FALSE(theirs.empty());
    // (It may let go idle after its last kernel: a slow build's exit path.)
    for (const Work& w : theirs)
        EXPECT_GE(w.start, mine.back().end) << a.err() << read_text(dir / "fake.log");
}

TEST(Release, AnAllocationInProgressIsNotIdleness)
{
    expect_the_holder_keeps_the_gpu({"--alloc-each-round", "64M"}, "FAKECUDA_MAP_US");
}

// Likewise a call that loads code: a driver loads a kernel at its first use
// (lazy loading), in calls such as cuFuncGetAttribute that the program makes
// before it launches it (tens of ms for PyTorch's kernels: counted as a
// pause, it would let the holder go in a check phase). Here each of the
// holder's last rounds begins with such a call that takes 1 s.
TEST(Release, LoadingAKernelIsNotIdleness)
{
    expect_the_holder_keeps_the_gpu({"--load-each-round"}, "FAKECUDA_LOAD_US");
}

// Issue 20. The deprecated launches (cuLaunch, cuLaunchGrid,
// cuLaunchGridAsync, cuLaunchCooperativeKernelMultiDevice), linked directly
// or handed out by cuGetProcAddress, wait for the lock like cuLaunchKernel.
TEST(Gate, DeprecatedLaunchesAreGated)
{
    for (const char* route : {"direct", "proc"}) {
        SCOPED_TRACE(route);
        TempDir dir;
        Daemon daemon(dir, {"--anti-thrashing", "on"});
        ClientRun run{{"--route", route, "--deprecated", "--kernels", "2", "--kernel-us", "30000"},
                      {{"FAKECUDA_KERNEL_US", "30000"}},
                      std::string(route) == "proc"};
        Pair p = run_pair(dir, daemon.socket(), run);
        expect_clean_exit(p.a);
        expect_clean_exit(p.b);
        const std::string log = dir / "fake.log";
        EXPECT_FALSE(overlapped(read_work(log), p.a.pid(), p.b.pid())) << read_text(log);
        for (pid_t pid : {p.a.pid(), p.b.pid()})
            for (const char* name : {"cuLaunch", "cuLaunchGrid", "cuLaunchGridAsync",
                                     "cuLaunchCooperativeKernelMultiDevice"})
                EXPECT_EQ(count_events(log, pid, std::string(" ") + name + " stream="), 2) << name;
    }
}

// ---- context-less calls ---------------------------------------------------------------

// Issue 20. With no current context, work on an explicit stream still
// reaches the GPU (the driver takes the context from the stream): it waits
// for the lock like any other.
TEST(Gate, ContextlessStreamCallsWaitForTheLock)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    const std::string stop = dir / "stop";
    // a holds the lock until it ends (no early release).
    Process a = start_client(dir, daemon.socket(),
                             {{"--kernels", "2", "--kernel-us", "10000", "--until", stop},
                              {{"NVSHARE_IDLE_RELEASE_MS", "0"}},
                              false},
                             "a");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    // b's allocation is managed memory: swappable memory would wait for the
    // grant in cuMemAlloc (no allocation returns unmapped memory).
    Process b = start_client(
        dir, daemon.socket(),
        {{"--kernels", "0", "--contextless"}, {{"NVSHARE_SWAP", "managed"}}, false}, "b");
    ASSERT_TRUE(wait_until([&] { return b.out().find("contextless=ready") != std::string::npos; }))
        << b.out() << b.err();
    // Unlocked, the calls return at once; gated, they wait for a. Either
    // way a lets go only after this.
    EXPECT_TRUE(wait_until([&] {
        return b.out().find("contextless=submitted") != std::string::npos ||
               is_waiting(daemon, b.pid());
    })) << b.out()
        << b.err();
    touch(stop);
    expect_clean_exit(a);
    expect_clean_exit(b);
    const auto work = read_work(dir / "fake.log");
    uint64_t a_end = 0;
    for (const Work& w : work_of(work, a.pid()))
        a_end = std::max(a_end, w.end);
    const auto mine = work_of(work, b.pid());
    ASSERT_FALSE(mine.empty()) << read_text(dir / "fake.log");
    for (const Work& w : mine)
        EXPECT_GE(w.start, a_end) << w.name << " ran while a held the lock";
}

// ---- failing open ---------------------------------------------------------------------

TEST(FailOpen, RunsWithoutADaemonWithOneWarning)
{
    TempDir dir;
    Process p = start_client(dir, dir / "absent.sock",
                             {{"--kernels", "3", "--kernel-us", "10000", "--alloc", "1M",
                               "--copies", "--hold-ms", "1500"},
                              {},
                              false},
                             "p");
    expect_clean_exit(p);
    const std::string err = p.err();
    size_t lines = 0;
    for (size_t at = err.find("[nvshare]"); at != std::string::npos;
         at = err.find("[nvshare]", at + 1))
        ++lines;
    EXPECT_EQ(lines, 1u) << err;
    EXPECT_NE(err.find("unscheduled"), std::string::npos) << err;
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "start"), 8);  // 3 kernels + 5 copies
}

TEST(FailOpen, RegistersAgainAfterADaemonRestart)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    const std::string stop = dir / "stop";
    Process a =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "1", "--kernel-us", "5000", "--until", stop}, {}, false}, "a");
    ASSERT_TRUE(
        wait_until([&] { return !Daemon::client_by_pid(daemon.status(), a.pid()).is_null(); }));
    daemon.stop();
    // Keeps running unscheduled while the daemon is gone.
    const int before = count_events(dir / "fake.log", a.pid(), "end");
    EXPECT_TRUE(
        wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= before + 5; }));
    ASSERT_TRUE(daemon.restart());
    EXPECT_TRUE(wait_until(
        [&] { return !Daemon::client_by_pid(daemon.status(), a.pid()).is_null(); }, seconds(30)))
        << a.err();
    // And is scheduled again: it holds the lock on the new daemon.
    EXPECT_TRUE(wait_until([&] {
        const auto me = Daemon::client_by_pid(daemon.status(), a.pid());
        return !me.is_null() && me["grants"].get<int>() >= 1;
    }));
    touch(stop);
    expect_clean_exit(a);
    EXPECT_NE(a.err().find("unscheduled"), std::string::npos) << a.err();
}

// The daemon crashes (SIGKILL, its socket file left behind) and comes back,
// several times, while three clients keep working: they never stop or hang,
// register with each new daemon, and are kept apart again once they have.
TEST(FailOpen, SurvivesRepeatedDaemonCrashes)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "100ms"});
    const std::string stop = dir / "stop";
    std::vector<Process> clients;
    for (const char* name : {"a", "b", "c"})
        clients.push_back(start_client(
            dir, daemon.socket(),
            {{"--kernels", "1", "--kernel-us", "2000", "--until", stop}, {}, false}, name));
    const std::string log = dir / "fake.log";
    auto all_scheduled = [&] {
        const auto s = daemon.status();
        for (auto& c : clients) {
            const auto me = Daemon::client_by_pid(s, c.pid());
            if (me.is_null() || me["grants"].get<int>() < 1)
                return false;
        }
        return true;
    };
    constexpr int kCrashes = 3;
    for (int crash = 0; crash < kCrashes; ++crash) {
        ASSERT_TRUE(wait_until(all_scheduled, seconds(30))) << "before crash " << crash;
        daemon.stop(SIGKILL);
        // Fail open: every client keeps working while no daemon runs.
        for (auto& c : clients) {
            const int before = count_events(log, c.pid(), "end");
            EXPECT_TRUE(wait_until([&] { return count_events(log, c.pid(), "end") >= before + 3; }))
                << "crash " << crash << ":\n"
                << c.err();
            ASSERT_TRUE(c.running()) << c.err();
        }
        ASSERT_TRUE(daemon.restart());
    }
    ASSERT_TRUE(wait_until(all_scheduled, seconds(30)));
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t scheduled_since = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
    // Exclusive again: work started from now on never overlaps, and everyone
    // still gets to work.
    for (auto& c : clients) {
        const int before = count_events(log, c.pid(), "end");
        EXPECT_TRUE(wait_until([&] { return count_events(log, c.pid(), "end") >= before + 3; }))
            << c.err();
    }
    touch(stop);
    for (auto& c : clients)
        expect_clean_exit(c);
    std::vector<Work> later;
    for (const Work& w : read_work(log))
        if (w.start > scheduled_since)
            later.push_back(w);
    for (size_t i = 0; i < clients.size(); ++i) {
        EXPECT_FALSE(work_of(later, clients[i].pid()).empty());
        for (size_t j = i + 1; j < clients.size(); ++j)
            EXPECT_FALSE(overlapped(later, clients[i].pid(), clients[j].pid()))
                << clients[i].pid() << " and " << clients[j].pid();
    }
}

// ---- processes ------------------------------------------------------------------------

// A child forked while the parent holds the lock does not inherit it: it
// registers on its own, and parent and child take turns.
TEST(Processes, ForkChildRegistersAnew)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    Process p =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "4", "--kernel-us", "30000", "--fork"}, {}, false}, "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("child=ok"), std::string::npos);
    const auto work = read_work(dir / "fake.log");
    pid_t child = 0;
    for (const Work& w : work)
        if (w.pid != p.pid())
            child = w.pid;
    ASSERT_NE(child, 0) << "the child ran no GPU work";
    EXPECT_FALSE(overlapped(work, p.pid(), child)) << read_text(dir / "fake.log");
    EXPECT_NE(daemon.log().find("pid " + std::to_string(child)), std::string::npos) << daemon.log();
}

TEST(Processes, NonCudaProcessIsUntouched)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    const auto before = daemon.status()["connections"].get<int>();
    for (const char* program : {"/bin/true", "/bin/sh"}) {
        Process p({.argv = {program, "-c", "exit 0"},
                   .env = {{"LD_PRELOAD", Paths::get().preload},
                           {"NVSHARE_SOCKET", daemon.socket()},
                           {"NVSHARE_DEBUG", "1"}},
                   .stdout_path = dir / "p.out",
                   .stderr_path = dir / "p.err"});
        EXPECT_EQ(p.wait(), 0);
        EXPECT_EQ(p.err(), "");
        EXPECT_EQ(p.out(), "");
    }
    EXPECT_EQ(daemon.log().find("registered"), std::string::npos) << daemon.log();
    EXPECT_EQ(daemon.status()["connections"].get<int>(), before);
}

// dlsym answers like glibc for everything but the driver names we wrap, and
// RTLD_NEXT still means "after the caller" (our override forwards by tail
// call, so glibc sees the real caller).
TEST(Dlsym, AnswersLikeGlibcExceptForWrappedDriverNames)
{
    TempDir dir;
    const char* probe = getenv("NVSHARE_TEST_DLSYM_PROBE");
    const char* q = getenv("NVSHARE_TEST_NEXT_PROBE_Q");
    ASSERT_TRUE(probe != nullptr && q != nullptr);
    auto run = [&](const std::map<std::string, std::string>& extra) {
        Process::Spec spec{.argv = {probe},
                           .env = {{"LD_PRELOAD", Paths::get().preload + " " + q},
                                   {"LD_LIBRARY_PATH", Paths::get().fake_dir},
                                   {"NVSHARE_SOCKET", dir / "absent.sock"}},
                           .stdout_path = dir / "probe.out",
                           .stderr_path = dir / "probe.err"};
        for (const auto& [k, v] : extra)
            spec.env[k] = v;
        Process p(std::move(spec));
        EXPECT_EQ(p.wait(), 0) << p.err();
        EXPECT_EQ(p.err(), "");
        return p.out();
    };
    EXPECT_EQ(run({}),
              "rtld_next=2\n"
              "default_before_load=null\n"
              "wrapped=libnvshare\n"
              "wrapped_ptsz=libnvshare\n"
              "default_after_load=libnvshare\n"
              "unwrapped=libcuda\n"
              "absent_in_driver=null\n"
              "missing=null\n");
    EXPECT_EQ(run({{"NVSHARE_DISABLE", "1"}}),
              "rtld_next=2\n"
              "default_before_load=null\n"
              "wrapped=libcuda\n"
              "wrapped_ptsz=libcuda\n"
              "default_after_load=libcuda\n"
              "unwrapped=libcuda\n"
              "absent_in_driver=null\n"
              "missing=null\n");
}

// ---- memory ---------------------------------------------------------------------------

TEST(Memory, SingleProcessLimit)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    const ClientRun base{{"--kernels", "0", "--alloc", "600M", "--allocs", "2"}, {}, false};
    auto run = [&](std::map<std::string, std::string> env, const char* name) {
        ClientRun r = base;
        r.env = std::move(env);
        Process p = start_client(dir, daemon.socket(), r, name);
        expect_clean_exit(p);
        return p.out();
    };
    EXPECT_EQ(run({}, "limited"), "alloc=ok\nalloc=oom\ndone=ok\n");
    EXPECT_EQ(run({{"NVSHARE_ENABLE_SINGLE_OVERSUB", "0"}}, "zero"),
              "alloc=ok\nalloc=oom\ndone=ok\n");
    EXPECT_EQ(run({{"NVSHARE_ENABLE_SINGLE_OVERSUB", "1"}}, "oversub"),
              "alloc=ok\nalloc=ok\ndone=ok\n");
}

// Managed memory lets a process go beyond the GPU's memory: the fake refuses
// plain device memory beyond its 16 GiB, as a GPU would.
TEST(Memory, RewriteToManagedAllowsOversubscription)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    const ClientRun run{
        {"--kernels", "1", "--alloc", "20G"}, {{"NVSHARE_ENABLE_SINGLE_OVERSUB", "1"}}, false};
    Process p = start_client(dir, daemon.socket(), run, "managed");
    expect_clean_exit(p);
    EXPECT_EQ(p.out(), "alloc=ok\ndone=ok\n");
    ClientRun plain = run;
    plain.env["NVSHARE_DISABLE"] = "1";
    Process q = start_client(dir, daemon.socket(), plain, "plain");
    expect_clean_exit(q);
    EXPECT_EQ(q.out(), "alloc=oom\ndone=ok\n");
}

TEST(Memory, MemInfoReportsTheCapacity)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "2G"});
    Process p = start_client(dir, daemon.socket(),
                             {{"--kernels", "0", "--alloc", "512M", "--meminfo"}, {}, false}, "p");
    expect_clean_exit(p);
    EXPECT_EQ(p.out(),
              "alloc=ok\nfree=1610612736\ntotal=2147483648\ndevice_total=2147483648\ndone=ok\n");
}

// Issue 20: free memory is what this process can really get: others' pinned
// memory (here plain device memory) is never paged out to make room.
TEST(Memory, MemInfoTakesOffWhatOthersPin)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "2G"});
    const std::string stop = dir / "stop";
    Process pinner = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "512M", "--until", stop}, {{"NVSHARE_MANAGED", "0"}}, false},
        "pinner");
    ASSERT_TRUE(wait_until([&] {
        const auto me = Daemon::client_by_pid(daemon.status(), pinner.pid());
        return !me.is_null() && me["pinned_memory"].get<uint64_t>() == 512ull << 20;
    })) << daemon.status().dump();
    // Its first round ran after the grant, which nvshared sends after what
    // the others pin: the answer cannot come too early.
    Process p = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "256M", "--meminfo-after-work"}, {}, false}, "p");
    expect_clean_exit(p);
    // 2 GiB less its own 256 MiB and the other's 512 MiB.
    EXPECT_EQ(p.out(),
              "alloc=ok\nfree=1342177280\ntotal=2147483648\ndevice_total=2147483648\n"
              "done=ok\n");
    touch(stop);
    expect_clean_exit(pinner);
    // Once the other is gone, all of it is free again.
    Process q = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "256M", "--meminfo-after-work"}, {}, false}, "q");
    expect_clean_exit(q);
    EXPECT_EQ(q.out(),
              "alloc=ok\nfree=1879048192\ntotal=2147483648\ndevice_total=2147483648\n"
              "done=ok\n");
}

TEST(Memory, UsageIsReportedToTheDaemon)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    const std::string stop = dir / "stop";
    Process p = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--alloc", "300M", "--managed", "100M", "--vmm",
                               "50M", "--async-alloc", "10M", "--until", stop},
                              {},
                              false},
                             "p");
    EXPECT_TRUE(wait_until([&] {
        const auto me = Daemon::client_by_pid(daemon.status(), p.pid());
        return !me.is_null() && me["memory"].get<uint64_t>() == 450ull << 20;
    })) << daemon.status().dump();
    touch(stop);
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("vmm=ok"), std::string::npos);
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc async"), 1);
}

// Issue 20. CUDA arrays and mipmapped arrays are device memory; a VMM
// handle retained from its mapping and released once still has its memory
// mapped. All of it is counted.
TEST(Memory, ArraysAndRetainedVmmAreCounted)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    const std::string stop = dir / "stop";
    Process p = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--arrays", "--vmm-retained", "8M", "--until", stop}, {}, false}, "p");
    // 16 MiB + 1 MiB + (1 MiB + 256 KiB) of arrays, 8 MiB of VMM.
    const uint64_t expected = (26ull << 20) + (256ull << 10);
    EXPECT_TRUE(wait_until([&] {
        const auto me = Daemon::client_by_pid(daemon.status(), p.pid());
        return !me.is_null() && me["memory"].get<uint64_t>() == expected &&
               me["pinned_memory"].get<uint64_t>() == expected;
    })) << daemon.status().dump()
        << p.out() << p.err();
    touch(stop);
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("vmm_retained=same"), std::string::npos) << p.out();
}

// Issue 20: graph memory (a stream-ordered allocation made during capture,
// an allocation node) sits in the driver's graph pool once launched, never
// paged: it is counted as pinned, from the pool's size.
TEST(Memory, GraphMemoryIsCountedFromThePool)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    const std::string stop = dir / "stop";
    Process p =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "1", "--graph-memory", "8M", "--until", stop}, {}, false}, "p");
    EXPECT_TRUE(wait_until([&] {
        const auto me = Daemon::client_by_pid(daemon.status(), p.pid());
        return !me.is_null() && me["memory"].get<uint64_t>() == 16ull << 20 &&
               me["pinned_memory"].get<uint64_t>() == 16ull << 20;
    })) << daemon.status().dump()
        << p.out() << p.err();
    touch(stop);
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("graph_memory=ok"), std::string::npos) << p.out();
}

// CUDA IPC cannot export managed memory: the program is told why and which
// variable keeps its memory plain; with it, the export works, the memory is
// accounted as resident and the process is still scheduled.
TEST(Memory, IpcOnManagedMemoryNamesTheOptOut)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    const ClientRun run{{"--kernels", "1", "--alloc", "1M", "--allocs", "2", "--ipc"}, {}, false};
    Process p = start_client(dir, daemon.socket(), run, "managed");
    expect_clean_exit(p);
    EXPECT_EQ(p.out(), "alloc=ok\nipc=error\nalloc=ok\nipc=error\ndone=ok\n");
    // One line, once per process, naming the variable.
    EXPECT_EQ(count_lines_containing(p.err(), "NVSHARE_MANAGED=0"), 1) << p.err();

    ClientRun plain = run;
    plain.env["NVSHARE_MANAGED"] = "0";
    Process q = start_client(dir, daemon.socket(), plain, "plain");
    expect_clean_exit(q);
    EXPECT_EQ(q.out(), "alloc=ok\nipc=ok\nalloc=ok\nipc=ok\ndone=ok\n");
    EXPECT_EQ(q.err(), "");
    EXPECT_EQ(count_events(dir / "fake.log", q.pid(), "alloc device 1048576"), 2);
    EXPECT_EQ(count_events(dir / "fake.log", q.pid(), "alloc managed"), 0);
    EXPECT_EQ(count_events(dir / "fake.log", q.pid(), "ipc export"), 2);
}

// GPUDirect RDMA (dma-buf export, peer-memory tokens) takes cuMemAlloc
// memory only, and managed memory is not RDMA-capable: on memory nvshare
// made managed, the program gets the driver's answer unchanged (through
// every route) and one line naming both ways to keep the memory plain; each
// path alone is enough to say so. With NVSHARE_MANAGED=0 the paths work.
TEST(Memory, GpuDirectOnManagedMemoryNamesTheOptOut)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    const std::vector<std::string> all{"--kernels", "1", "--alloc",     "1M",
                                       "--allocs",  "2", "--gpudirect", "dmabuf,p2p,rdma"};
    const std::string lost = "alloc=ok\ndmabuf=error:1\np2p=error:1\nrdma=ok:0\n";
    for (const auto& [route, dl_client] : std::vector<std::pair<std::string, bool>>{
             {"direct", false}, {"dlsym", true}, {"proc", true}}) {
        ClientRun run{all, {}, dl_client};
        run.args.insert(run.args.end(), {"--route", route});
        Process p = start_client(dir, daemon.socket(), run, "managed-" + route);
        expect_clean_exit(p);
        EXPECT_EQ(p.out(), lost + lost + "done=ok\n") << route;
        EXPECT_EQ(count_lines_containing(p.err(), "NVSHARE_MANAGED=0"), 1) << route << p.err();
        EXPECT_EQ(count_lines_containing(p.err(), "preload-plain.conf"), 1) << route << p.err();
        EXPECT_EQ(count_lines_containing(p.err(), "dma-buf"), 1) << route << p.err();
    }
    for (const auto& [path, named] : std::vector<std::pair<std::string, std::string>>{
             {"dmabuf", "dma-buf"},
             {"p2p", "CU_POINTER_ATTRIBUTE_P2P_TOKENS"},
             {"rdma", "CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE"}}) {
        Process p = start_client(
            dir, daemon.socket(),
            {{"--kernels", "1", "--alloc", "1M", "--allocs", "2", "--gpudirect", path}, {}, false},
            "only-" + path);
        expect_clean_exit(p);
        EXPECT_EQ(count_lines_containing(p.err(), "NVSHARE_MANAGED=0"), 1) << path << p.err();
        EXPECT_EQ(count_lines_containing(p.err(), named), 1) << path << p.err();
    }

    Process q =
        start_client(dir, daemon.socket(), {all, {{"NVSHARE_MANAGED", "0"}}, false}, "plain");
    expect_clean_exit(q);
    const std::string kept = "alloc=ok\ndmabuf=ok\np2p=ok\nrdma=ok:1\n";
    EXPECT_EQ(q.out(), kept + kept + "done=ok\n");
    EXPECT_EQ(q.err(), "");
    EXPECT_EQ(count_events(dir / "fake.log", q.pid(), "dmabuf export 524288"), 2);
    EXPECT_EQ(count_events(dir / "fake.log", q.pid(), "p2p tokens 1048576"), 2);
}

// Where the GPU cannot let the CPU and itself use managed memory at once
// (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0), cudaMalloc memory
// stays plain, accounted as resident, with one warning; the process is
// still scheduled. NVSHARE_MANAGED=0 asked for plain memory: no warning.
TEST(Memory, NoConcurrentManagedAccessKeepsMemoryPlain)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    const std::string stop = dir / "stop";
    Process p = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--alloc", "1M", "--allocs", "2", "--until", stop},
                              {{"FAKECUDA_NO_CONCURRENT_MANAGED", "1"}},
                              false},
                             "p");
    EXPECT_TRUE(wait_until([&] {
        const auto me = Daemon::client_by_pid(daemon.status(), p.pid());
        return !me.is_null() && me["pinned_memory"].get<uint64_t>() == 2ull << 20 &&
               me["memory"].get<uint64_t>() == 2ull << 20;
    })) << daemon.status().dump()
        << p.err();
    touch(stop);
    expect_clean_exit(p);
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc device 1048576"), 2);
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc managed"), 0);
    EXPECT_EQ(count_lines_containing(p.err(), "CONCURRENT_MANAGED_ACCESS"), 1) << p.err();

    Process q = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--alloc", "1M"},
                              {{"FAKECUDA_NO_CONCURRENT_MANAGED", "1"}, {"NVSHARE_MANAGED", "0"}},
                              false},
                             "q");
    expect_clean_exit(q);
    EXPECT_EQ(q.err(), "");
    EXPECT_EQ(count_events(dir / "fake.log", q.pid(), "alloc device 1048576"), 1);
}

TEST(Memory, PlainMemoryIsStillScheduledAndAccountedAsResident)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    ClientRun run{{"--kernels", "4", "--kernel-us", "30000", "--alloc", "1M"},
                  {{"NVSHARE_MANAGED", "0"}},
                  false};
    Pair p = run_pair(dir, daemon.socket(), run);
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    const auto work = read_work(dir / "fake.log");
    EXPECT_FALSE(overlapped(work, p.a.pid(), p.b.pid())) << read_text(dir / "fake.log");
    for (pid_t pid : {p.a.pid(), p.b.pid()}) {
        EXPECT_EQ(count_events(dir / "fake.log", pid, "alloc device 1048576"), 1);
        EXPECT_EQ(count_events(dir / "fake.log", pid, "alloc managed"), 0);
    }

    const std::string stop = dir / "stop";
    Process c = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "64M", "--until", stop}, {{"NVSHARE_MANAGED", "0"}}, false},
        "c");
    EXPECT_TRUE(wait_until([&] {
        const auto me = Daemon::client_by_pid(daemon.status(), c.pid());
        return !me.is_null() && me["pinned_memory"].get<uint64_t>() == 64ull << 20 &&
               me["memory"].get<uint64_t>() == 64ull << 20;
    })) << daemon.status().dump();
    touch(stop);
    expect_clean_exit(c);
}

TEST(Memory, ManagedVariableRejectsNonsenseWithAWarning)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    Process p = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "1M"}, {{"NVSHARE_MANAGED", "maybe"}}, false}, "p");
    expect_clean_exit(p);
    EXPECT_NE(p.err().find("ignoring NVSHARE_MANAGED=maybe"), std::string::npos) << p.err();
    // Rewritten as by default: a block of a slab of swappable memory.
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc vmm 8388608"), 1);
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc device"), 0);
}

// ---- capture ----------------------------------------------------------------------------

// Work captured into a graph does nothing, so capture never waits for the
// lock; the graph's launch does.
TEST(Capture, NeverWaitsInsideACapture)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    const std::string stop = dir / "stop";
    Process a =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "2", "--kernel-us", "10000", "--until", stop}, {}, false}, "a");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    Process b = start_client(
        dir, daemon.socket(),
        {{"--route", "proc", "--graph", "--kernels", "3", "--kernel-us", "10000"}, {}, true}, "b");
    EXPECT_TRUE(wait_until([&] { return b.out().find("captured=ok") != std::string::npos; }))
        << b.out() << b.err();
    // Captured while a held the lock, and the graph has not run yet.
    EXPECT_TRUE(b.running());
    EXPECT_EQ(count_events(dir / "fake.log", b.pid(), "start"), 0);
    touch(stop);
    expect_clean_exit(a);
    expect_clean_exit(b);
    EXPECT_EQ(count_events(dir / "fake.log", b.pid(), "cuGraphLaunch:cuLaunchKernel"), 6);
    EXPECT_FALSE(overlapped(read_work(dir / "fake.log"), a.pid(), b.pid()));
}

// Issue 20. A capture that ends in an error (a fork never joined back) and
// a stream destroyed while capturing end their captures: the process must
// not think one is still going on, or it would never release early (nor
// prefetch, evict, or drop before three quarters of the grace).
TEST(Capture, FailedCapturesEndTheirCount)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    const std::string stop = dir / "stop";
    Process a = start_client(
        dir, daemon.socket(),
        {{"--failed-captures", "--kernels", "2", "--pause-until", stop}, {}, false}, "a");
    ASSERT_TRUE(wait_until([&] { return count_events(dir / "fake.log", a.pid(), "end") >= 2; }));
    // CUDA_ERROR_STREAM_CAPTURE_UNJOINED
    EXPECT_NE(a.out().find("unjoined=904"), std::string::npos) << a.out();
    EXPECT_NE(a.out().find("destroy_capturing=0"), std::string::npos) << a.out();
    Process b = start_client(dir, daemon.socket(), {{"--kernels", "3"}, {}, false}, "b");
    EXPECT_EQ(b.wait(seconds(30)), 0) << "a never released early\n" << b.out() << b.err();
    touch(stop);
    expect_clean_exit(a);
}

}  // namespace
}  // namespace nvshare::test

// ---- switching: bulk migration when the lock changes hands (issue 6) -----------------

namespace nvshare::test {
namespace {

int events_of_both(const TempDir& dir, const Pair& p, const std::string& needle)
{
    const std::string log = dir / "fake.log";
    return count_events(log, p.a.pid(), needle) + count_events(log, p.b.pid(), needle);
}

// The managed-memory path (NVSHARE_SWAP=managed, and where the driver has
// no VMM memory on the host; the swap engine's tests follow these).
// On an oversubscribed GPU the holder that goes idle evicts its data to host
// memory before it releases, and the next holder prefetches its own data in
// bulk when granted; the daemon learns what moved.
TEST(Switching, OversubscribedGpuSwapsInBulk)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    const std::string stop = dir / "stop";
    Pair p = run_pair(dir, daemon.socket(),
                      {{"--kernels", "2", "--alloc", "700M", "--pause-until", stop},
                       {{"NVSHARE_SWAP", "managed"}},
                       false});
    const bool stats_seen = wait_until([&] {
        const auto s = daemon.status();
        if (s.is_null())
            return false;
        return sum_over_clients(s, "bytes_evicted") >= 376ull << 20 &&
               sum_over_clients(s, "bytes_prefetched") >= 700ull << 20 &&
               s["gpus"][0]["last_swap_in_us"].get<uint64_t>() > 0;
    });
    touch(stop);
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    EXPECT_TRUE(stats_seen) << daemon.status().dump();
    EXPECT_FALSE(overlapped(read_work(dir / "fake.log"), p.a.pid(), p.b.pid()));
    // 1 GiB less the other's 700 MiB leaves room for 324 MiB: 376 MiB go.
    EXPECT_GE(events_of_both(dir, p, "prefetch to host 394264576"), 1)
        << read_text(dir / "fake.log");
    EXPECT_GE(events_of_both(dir, p, "prefetch to device 734003200"), 1)
        << read_text(dir / "fake.log");
}

// Where everything fits, data stays where it is: each allocation is moved to
// the GPU once, in bulk when first granted (rather than by page faults), and
// nothing is ever evicted.
// Two clients of 2 x 300 MiB on a GPU of 1 GiB: beside the next holder's
// 600 MiB there is room for 424 MiB of the releasing client's: its newer
// allocation stays whole, 124 MiB of the older stay, and 176 MiB go.
TEST(Switching, EvictsOnlyWhatTheNextHolderNeeds)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    const std::string stop = dir / "stop";
    Pair p =
        run_pair(dir, daemon.socket(),
                 {{"--kernels", "2", "--alloc", "300M", "--allocs", "2", "--pause-until", stop},
                  {{"FAKECUDA_NO_HOST_VMM", "1"}},  // the engine cannot run: managed
                  false});
    uint64_t evicted = 0, swap_outs = 0;
    const bool switched = wait_until([&] {
        const auto s = daemon.status();
        evicted = sum_over_clients(s, "bytes_evicted");
        swap_outs = sum_over_clients(s, "swap_outs");
        return swap_outs >= 1;
    });
    touch(stop);
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    EXPECT_TRUE(switched) << daemon.status().dump();
    EXPECT_EQ(evicted, swap_outs * (176ull << 20)) << daemon.status().dump();
    EXPECT_FALSE(overlapped(read_work(dir / "fake.log"), p.a.pid(), p.b.pid()));
    EXPECT_GE(events_of_both(dir, p, "prefetch to host 184549376"), 1)
        << read_text(dir / "fake.log");
}

// After a grant on an oversubscribed GPU the program's kernels wait for the
// bulk swap-in instead of faulting their data in beside it: none of its
// kernels overlaps its own prefetches (slowed down to 100 ms each here)
// after the first.
TEST(Switching, WorkWaitsForTheSwapIn)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G", "--time-quantum", "100ms"});
    const std::string stop = dir / "stop";
    Pair p = run_pair(dir, daemon.socket(),
                      {{"--kernels", "2", "--alloc", "700M", "--until", stop},
                       {{"FAKECUDA_COPY_US", "50000"}, {"NVSHARE_SWAP", "managed"}},
                       false});
    // Busy clients take turns at the quantum: wait for swap-ins of evicted data.
    EXPECT_TRUE(wait_until([&] { return sum_over_clients(daemon.status(), "swap_outs") >= 3; }))
        << daemon.status().dump();
    touch(stop);
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    const auto work = read_work(dir / "fake.log");
    int prefetches = 0;
    for (pid_t pid : {p.a.pid(), p.b.pid()}) {
        const auto mine = work_of(work, pid);
        bool first = true;
        for (const Work& w : mine) {
            if (w.name.find("cuMemPrefetchAsync") == std::string::npos)
                continue;
            // The first moves new memory in, with work running beside it if
            // the GPU was not yet oversubscribed when it was granted; after
            // that they alternate: evictions (after a drain), swap-ins.
            if (std::exchange(first, false))
                continue;
            ++prefetches;
            for (const Work& k : mine) {
                if (k.name.find("cuLaunchKernel") == std::string::npos)
                    continue;
                EXPECT_FALSE(k.start < w.end && w.start < k.end)
                    << "kernel [" << k.start << ", " << k.end << ") overlaps prefetch [" << w.start
                    << ", " << w.end << ")";
            }
        }
    }
    EXPECT_GE(prefetches, 4) << read_text(dir / "fake.log");
}

// Managed memory (NVSHARE_SWAP=managed) of processes that fit together.
TEST(Switching, FitsMovesEachAllocationOnceAndNeverEvicts)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    Pair p = run_pair(dir, daemon.socket(),
                      {{"--kernels", "2", "--alloc", "1M", "--hold-ms", "400"},
                       {{"NVSHARE_SWAP", "managed"}},
                       false});
    expect_clean_exit(p.a);
    expect_clean_exit(p.b);
    const std::string log = dir / "fake.log";
    EXPECT_FALSE(overlapped(read_work(log), p.a.pid(), p.b.pid()));
    for (pid_t pid : {p.a.pid(), p.b.pid()}) {
        EXPECT_EQ(count_events(log, pid, "prefetch to device 1048576"), 1) << read_text(log);
        EXPECT_EQ(count_events(log, pid, "prefetch to host"), 0) << read_text(log);
    }
}

// The policy variables turn the moves off (demand paging only) or on.
TEST(Switching, PolicyVariablesDecide)
{
    {
        TempDir dir;
        Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
        Pair p = run_pair(dir, daemon.socket(),
                          {{"--kernels", "2", "--alloc", "700M", "--hold-ms", "400"},
                           {{"NVSHARE_PREFETCH", "0"}, {"NVSHARE_EVICT", "off"}},
                           false});
        expect_clean_exit(p.a);
        expect_clean_exit(p.b);
        EXPECT_EQ(events_of_both(dir, p, "prefetch to"), 0) << read_text(dir / "fake.log");
    }
    {
        TempDir dir;
        Daemon daemon(dir, {"--anti-thrashing", "on"});
        Pair p = run_pair(
            dir, daemon.socket(),
            {{"--kernels", "2", "--alloc", "1M", "--hold-ms", "400"},
             {{"NVSHARE_PREFETCH", "1"}, {"NVSHARE_EVICT", "1"}, {"NVSHARE_SWAP", "managed"}},
             false});
        expect_clean_exit(p.a);
        expect_clean_exit(p.b);
        EXPECT_GE(events_of_both(dir, p, "prefetch to device 1048576"), 2);
        EXPECT_GE(events_of_both(dir, p, "prefetch to host 1048576"), 1);
    }
}

// ---- the swap engine (issue 13) -----------------------------------------------------

// The fake's log lines of `pid` that say GPU work touched memory with nothing
// mapped (it refused to run them, as a GPU faults).
int faults(const TempDir& dir, pid_t pid)
{
    return count_events(dir / "fake.log", pid, " fault ");
}

// Two clients of 350 MiB on a GPU of 512 MiB, their device allocations
// swappable (VMM chunks of 64 MiB): the releaser copies out what does not fit
// beside the other to its registered host memory and gives the device memory
// back (nothing stays mapped at those addresses), the other gets device
// memory for what it allocated before its grant; each checks at the end
// (after a swap-in) that every byte of its data is what it wrote.
// Beside the other's 350 MiB, 162 MiB may stay, less the engine's headroom
// for contexts (a 32nd of the capacity): 146 MiB, two chunks (128 MiB), so
// 222 MiB move (three chunks of 64 MiB and the last of 30).
// Two clients of 350 MiB each (or `alloc`) on a capacity of 512 MiB (auto),
// 20 kernels (or `kernels`) of 50 ms each with 300 ms holds: they take turns
// and their data moves. Both end with their data checked; `env` is added to
// both environments.
Pair run_swapping_pair(const TempDir& dir, const Daemon& daemon,
                       std::map<std::string, std::string> env, const std::string& alloc = "350M",
                       const std::string& kernels = "20", const std::string& allocs = "1")
{
    env["NVSHARE_DEBUG"] = "1";
    Pair p = run_pair(dir, daemon.socket(),
                      {{"--kernels", kernels, "--kernel-us", "50000", "--alloc", alloc, "--allocs",
                        allocs, "--check-data", "--hold-ms", "300"},
                       env,
                       false});
    expect_clean_exit(p.a, seconds(240));
    expect_clean_exit(p.b, seconds(240));
    for (Process* c : {&p.a, &p.b}) {
        EXPECT_NE(c->out().find("data=ok"), std::string::npos) << c->out() << c->err();
        EXPECT_EQ(faults(dir, c->pid()), 0) << read_text(dir / "fake.log");
    }
    return p;
}

TEST(SwapEngine, SwapsChunksOutAndInAndKeepsTheData)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "512M"});
    const Pair p = run_swapping_pair(dir, daemon, {});
    // What the clients reported, ended clients included (each swap-in is
    // reported at its grant).
    const auto status = daemon.status();
    uint64_t out = 0, in = 0;
    for (const auto& u : status["usage"]) {
        out += u["bytes_swapped_out"].get<uint64_t>();
        in += u["bytes_swapped_in"].get<uint64_t>();
    }
    EXPECT_GT(out, 0u) << status.dump();
    EXPECT_EQ(out % (222ull << 20), 0u) << status.dump();
    if (kTimingsHold) {
        EXPECT_GT(in, 0u) << status.dump();
    }
    // The program's kernels take turns (the engine's copies may overlap: a
    // releaser swaps out after it lets go).
    EXPECT_FALSE(
        overlapped(work_named(read_work(dir / "fake.log"), "cuLaunch"), p.a.pid(), p.b.pid()));
    // Host memory was made (registered) for the chunks that moved, no
    // host-located VMM memory (that is for a holder whose GPU is full), and
    // nothing was migrated by the driver.
    EXPECT_GE(events_of_both(dir, p, "host-register 67108864"), 3);
    EXPECT_EQ(events_of_both(dir, p, "alloc vmm-host"), 0) << read_text(dir / "fake.log");
    EXPECT_EQ(events_of_both(dir, p, "prefetch to"), 0) << read_text(dir / "fake.log");
    // A swap-in grants access to the chunks it maps in one call for the
    // four of them (222 MiB), where a call per chunk gave 64 MiB each.
    if (in > 0) {
        EXPECT_GE(events_of_both(dir, p, "access 232783872"), 1) << read_text(dir / "fake.log");
    }
    // The first holder made that host memory during its 1 s of work while
    // the other waited, before its swap-out (pinning costs ~10 times the
    // copy).
    if (kTimingsHold) {
        EXPECT_TRUE(p.a.err().find(kMadeAhead) != std::string::npos ||
                    p.b.err().find(kMadeAhead) != std::string::npos)
            << p.a.err() << p.b.err();
    }
}

// Allocations smaller than the granularity (2 MiB in the fake) are blocks of
// slabs of 8 MiB, swappable memory that moves with the rest, not managed
// memory: 1200 of 300 KiB each (27 to a slab: 45 slabs, 360 MiB) in each of
// two processes on one device of 512 MiB take turns, swap out and in whole
// slabs and keep their data. With nothing but swappable memory, a releaser
// lets go first and then swaps out (its log says so; whether the copies
// then overlap the next holder's depends on their speed: see
// TheNextHolderCopiesInWhileTheReleaserCopiesOut).
TEST(SwapEngine, SmallAllocationsAreBlocksOfSlabsThatSwapWithTheRest)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "512M"});
    const Pair p = run_swapping_pair(dir, daemon,
                                     {{"FAKECUDA_SHARED_DEVICE", dir / "device"},
                                      {"FAKECUDA_MEMORY", std::to_string(512ull << 20)}},
                                     "300K", "20", "1200");
    const std::string log = dir / "fake.log";
    EXPECT_EQ(events_of_both(dir, p, "alloc managed"), 0) << p.a.err();
    EXPECT_GE(events_of_both(dir, p, "alloc vmm 8388608"), 2 * 45) << p.a.err() << p.b.err();
    EXPECT_GE(events_of_both(dir, p, "host-register 8388608"), 1);
    // Whole slabs moved out (each process says what it swapped out).
    int swap_outs = 0;
    for (const Process* c : {&p.a, &p.b}) {
        std::istringstream lines(c->err());
        for (std::string line; std::getline(lines, line);) {
            const size_t at = line.find("swapped out ");
            if (at == std::string::npos)
                continue;
            const uint64_t bytes = std::stoull(line.substr(at + 12));
            EXPECT_EQ(bytes % (8ull << 20), 0u) << line;
            swap_outs += bytes != 0;
        }
    }
    EXPECT_GE(swap_outs, 1) << p.a.err() << p.b.err();
    EXPECT_FALSE(overlapped(work_named(read_work(log), "cuLaunch"), p.a.pid(), p.b.pid()));
    const std::string let_go_first = "let go before swapping out";
    EXPECT_TRUE(p.a.err().find(let_go_first) != std::string::npos ||
                p.b.err().find(let_go_first) != std::string::npos)
        << p.a.err() << p.b.err();
}

// On a GPU of 64 GiB or more the engine's chunks are of 512 MiB, each mapped
// at a multiple of its size, so that the driver can map it with large pages
// (granting access to them while copies run costs a fifth or less of
// 64 MiB chunks'). Two clients of 1400 MiB (two chunks of 512 MiB and one
// of 376) on a capacity of 2 GiB of a 64 GiB GPU take turns.
TEST(SwapEngine, LargeGpusMoveLargeChunksAlignedToTheirSize)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "2G"});
    const Pair p = run_swapping_pair(
        dir, daemon, {{"FAKECUDA_MEMORY", std::to_string(64ull << 30)}}, "1400M", "12");
    const std::string log = dir / "fake.log";
    EXPECT_GE(events_of_both(dir, p, "map 536870912 vmm"), 4) << read_text(log);
    EXPECT_EQ(events_of_both(dir, p, "unaligned"), 0) << read_text(log);
    EXPECT_EQ(events_of_both(dir, p, "map 67108864"), 0) << read_text(log);
    // Swapped out to host memory of a chunk's size, and back in with access
    // granted to each 512 MiB chunk on its own (no run of them).
    EXPECT_GE(events_of_both(dir, p, "host-register 536870912"), 1) << read_text(log);
    EXPECT_GE(events_of_both(dir, p, "access 536870912"), 2) << read_text(log);
    EXPECT_EQ(events_of_both(dir, p, "access 1073741824"), 0) << read_text(log);
}

// Host memory that a holder of `a` and `b` placed its chunks in at a grant
// (alloc vmm-host) before it had waited `patience` for room without finding
// any. The wait began with the swap-in's first round, at or after the
// holder's first look for device room (meminfo, or a cuMemCreate of device
// memory) since the other's last kernel (its grant came after that kernel);
// every round that found room made device memory (alloc vmm). The round
// that places in host memory starts `patience` after the first round and
// after the last round that found room (swap::RoomWait, room_wait_test.cpp),
// so some span of `patience` without device memory made lies between the
// wait's start and the placement. One line per placement without one;
// empty if none. `patience(pid)`: the least that process's grants allow.
std::string early_host_placements(const std::string& log, pid_t a, pid_t b,
                                  const std::function<uint64_t(pid_t)>& patience)
{
    const auto events = read_events(log);
    const auto kernels = work_named(read_work(log), "cuLaunch");
    const auto starts_with = [](const std::string& s, const char* prefix) {
        return s.rfind(prefix, 0) == 0;
    };
    std::ostringstream early;
    for (const Event& placed : events) {
        if ((placed.pid != a && placed.pid != b) || !starts_with(placed.what, "alloc vmm-host"))
            continue;
        const pid_t other = placed.pid == a ? b : a;
        uint64_t since = 0;  // the other's last kernel's end
        for (const Work& k : kernels)
            if (k.pid == other && k.end < placed.ns)
                since = std::max(since, k.end);
        std::vector<uint64_t> found;  // the wait's start, then device memory made
        for (const Event& e : events) {
            if (e.pid != placed.pid || e.ns <= since || e.ns >= placed.ns)
                continue;
            const bool made = starts_with(e.what, "alloc vmm ");
            const bool looked =
                made || starts_with(e.what, "meminfo") || starts_with(e.what, "full vmm");
            if (found.empty() ? looked : made)
                found.push_back(e.ns);
        }
        if (found.empty())
            found.push_back(since);
        found.push_back(placed.ns);
        uint64_t longest = 0;
        for (size_t k = 1; k < found.size(); ++k)
            longest = std::max(longest, found[k] - found[k - 1]);
        if (longest < patience(placed.pid))
            early << placed.ns << " " << placed.pid << " " << placed.what << ": longest wait "
                  << longest / 1000000 << " ms since " << found.front() << "\n";
    }
    return early.str();
}

// A holder lets go before it swaps out, so that its copies out overlap the
// next holder's copies in: here both share one fake device of 512 MiB (each
// needs 350 MiB; every copy of a chunk takes 40 ms). The next holder finds
// no room at first and takes it as the releaser's groups leave, rather than
// pinning host memory for what does not fit (no host-located VMM memory).
// It goes to host memory only where the room has not grown for kRoomWaitNs (a
// loaded machine can take longer than that to make the releaser's host
// memory): this checks that decision as the fake's log shows it, not that the
// machine was fast enough never to take it; the decision itself is
// room_wait_test.cpp's.
TEST(SwapEngine, TheNextHolderCopiesInWhileTheReleaserCopiesOut)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "512M"});
    const Pair p = run_swapping_pair(dir, daemon,
                                     {{"FAKECUDA_SHARED_DEVICE", dir / "device"},
                                      {"FAKECUDA_MEMORY", std::to_string(512ull << 20)},
                                      {"FAKECUDA_COPY_US", "40000"}});
    const std::string log = dir / "fake.log";
    const auto work = read_work(log);
    EXPECT_FALSE(overlapped(work_named(work, "cuLaunch"), p.a.pid(), p.b.pid()));
    // A grant that is neither exclusive nor oversubscribed waits less
    // (kSharedRoomWaitNs): a loaded machine can make a releaser report so
    // little memory left on the GPU that nvshared grants both at once.
    // nvshared's log names the exclusive ones; a shared one may also be
    // oversubscribed, so only the shorter wait is certain there.
    const std::string journal = daemon.log();
    const auto patience = [&](pid_t pid) {
        std::istringstream lines(journal);
        const std::string who = "pid " + std::to_string(pid) + " (";
        for (std::string line; std::getline(lines, line);)
            if (line.find(who) != std::string::npos &&
                line.find("): granted ") != std::string::npos &&
                line.find(", shared") != std::string::npos)
                return tuning::kSharedRoomWaitNs;
        return tuning::kRoomWaitNs;
    };
    EXPECT_EQ(early_host_placements(log, p.a.pid(), p.b.pid(), patience), "")
        << read_text(log) << p.a.err() << p.b.err() << journal;
    if (!kTimingsHold)
        return;
    EXPECT_TRUE(overlapped(work_named(work, "cuMemcpyAsync"), p.a.pid(), p.b.pid()))
        << read_text(log) << p.a.err() << p.b.err();
}

// At a program's exit cudart releases its primary context, which can come
// while the library moves the process's memory out after letting go: the
// release waits for that swap-out (300 ms a copy here, so the release comes
// in its middle), which ends whole. Without the wait the context went
// midway, the copies would fail and the data stay on the GPU (the driver
// fails work on a released context, as the fake does here). The
// holder leaves room for the other's 350 MiB beside the 512 MiB: 222 MiB of
// its own move, four chunks (as in SwapsChunksOutAndInAndKeepsTheData).
TEST(SwapEngine, AnExitThatReleasesTheContextWaitsForTheSwapOut)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "512M"});
    const std::string exiting = dir / "exiting";
    const std::map<std::string, std::string> env{{"NVSHARE_DEBUG", "1"},
                                                 {"FAKECUDA_COPY_US", "300000"}};
    Process holder = start_client(dir, daemon.socket(),
                                  {{"--alloc", "350M", "--kernels", "4", "--kernel-us", "50000",
                                    "--release-primary-when", exiting},
                                   env,
                                   false},
                                  "holder");
    ASSERT_TRUE(
        wait_until([&] { return count_events(dir / "fake.log", holder.pid(), "end") >= 1; }));
    Process other = start_client(
        dir, daemon.socket(),
        {{"--alloc", "350M", "--kernels", "4", "--kernel-us", "50000", "--check-data"}, env, false},
        "other");
    EXPECT_TRUE(wait_until([&] {
        return count_events(dir / "fake.log", holder.pid(), "cuMemcpyAsync") >= 1;
    })) << holder.err();
    touch(exiting);
    expect_clean_exit(holder, seconds(120));
    expect_clean_exit(other, seconds(120));
    EXPECT_NE(holder.out().find("primary-release=0"), std::string::npos) << holder.out();
    EXPECT_EQ(holder.err().find("its data stays there"), std::string::npos) << holder.err();
    // Every chunk copied out had its device memory released after (the
    // copies' ends are in the fake's log however soon the process exits; a
    // copy that failed keeps its chunk).
    const auto copies =
        work_named(work_of(read_work(dir / "fake.log"), holder.pid()), "cuMemcpyAsync");
    ASSERT_GE(copies.size(), 1u) << read_text(dir / "fake.log");
    // The release was called while the swap-out still copied (else this
    // test would check nothing): before its last copy ended.
    const auto called = numbers_after(holder.out(), "primary-release-called-ns=", "");
    ASSERT_EQ(called.size(), 1u) << holder.out();
    uint64_t last_end = 0;
    for (const auto& c : copies)
        last_end = std::max(last_end, c.end);
    EXPECT_LT(called[0], last_end) << holder.out() << read_text(dir / "fake.log");
    EXPECT_EQ(count_events(dir / "fake.log", holder.pid(), "cuMemRelease"),
              static_cast<int>(copies.size()))
        << read_text(dir / "fake.log");
    EXPECT_NE(other.out().find("data=ok"), std::string::npos) << other.out() << other.err();
}

// After a grant the program's work waits until its data is back: none of its
// kernels overlaps the engine's copies (slowed to 20 ms each here).
TEST(SwapEngine, WorkWaitsForTheSwapIn)
{
    TempDir dir;
    Daemon daemon(dir,
                  {"--anti-thrashing", "auto", "--capacity", "512M", "--time-quantum", "100ms"});
    const std::string stop = dir / "stop";
    Pair p = run_pair(dir, daemon.socket(),
                      {{"--kernels", "2", "--alloc", "350M", "--check-data", "--until", stop},
                       {{"FAKECUDA_COPY_US", "20000"}},
                       false});
    // Each swap-in (4 copies) makes the quantum 10 times as long.
    EXPECT_TRUE(
        wait_until([&] { return sum_over_clients(daemon.status(), "swap_ins") >= 2; }, seconds(60)))
        << daemon.status().dump();
    touch(stop);
    expect_clean_exit(p.a, seconds(180));
    expect_clean_exit(p.b, seconds(180));
    const auto work = read_work(dir / "fake.log");
    int copies = 0;
    for (Process* c : {&p.a, &p.b}) {
        EXPECT_NE(c->out().find("data=ok"), std::string::npos) << c->out() << c->err();
        EXPECT_EQ(faults(dir, c->pid()), 0);
        const auto mine = work_of(work, c->pid());
        for (const Work& w : mine) {
            if (w.name != "cuMemcpyAsync")  // the engine's own copies
                continue;
            ++copies;
            for (const Work& k : mine) {
                if (k.name.find("cuLaunchKernel") == std::string::npos)
                    continue;
                EXPECT_FALSE(k.start < w.end && w.start < k.end)
                    << "kernel [" << k.start << ", " << k.end << ") overlaps copy [" << w.start
                    << ", " << w.end << ")";
            }
        }
    }
    EXPECT_GE(copies, 8) << read_text(dir / "fake.log");  // two swaps of 4 chunks
}

// Without nvshared the library fails open: memory a process allocated
// before anything was granted gets its memory at once, and its work (which
// then runs unscheduled) finds it there.
TEST(SwapEngine, FailingOpenGivesEveryChunkMemory)
{
    TempDir dir;
    Process p = start_client(dir, dir / "absent.sock",
                             {{"--kernels", "3", "--kernel-us", "10000", "--alloc", "200M",
                               "--allocs", "2", "--check-data"},
                              {},
                              false},
                             "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("data=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_EQ(faults(dir, p.pid()), 0) << read_text(dir / "fake.log");
    EXPECT_GE(count_events(dir / "fake.log", p.pid(), "alloc vmm 67108864"), 6);
}

// A pointer question about memory allocated before the process's first
// grant waits for the grant (the driver knows the address only then), and
// the range is the allocation's, not one chunk's.
TEST(SwapEngine, PointerQueriesSeeTheWholeAllocation)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    Process p = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--kernel-us", "1000", "--alloc", "200M", "--gpudirect", "rdma"},
         {},
         false},
        "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("rdma=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_EQ(faults(dir, p.pid()), 0);
}

// No allocation returns memory with nothing mapped behind it (issue 43,
// item 1; preload/README.md, the invariant): work that reaches it past the
// gate at once (a memset by a name no hook wraps, as a tool's trampoline
// would make) finds it mapped. A process that does not hold the GPU waits in
// the allocation for its grant, as its work would wait at the gate. Before,
// the allocation returned at once with nothing mapped, and the memset
// faulted (escape=700, the process's context lost).
TEST(Allocation, NeverReturnsMemoryWithNothingMappedBehindIt)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    Process a = start_client(
        dir, daemon.socket(),
        {{"--kernels", "8", "--kernel-us", "50000", "--alloc", "64M"}, {}, false}, "a");
    ASSERT_TRUE(launched_one(dir, a)) << a.out() << a.err();
    Process b = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "64M", "--escape-after-alloc", "--check-data"}, {}, false},
        "b");
    expect_clean_exit(a);
    expect_clean_exit(b);
    EXPECT_NE(b.out().find("escape=0 "), std::string::npos) << b.out() << b.err();
    EXPECT_NE(b.out().find("data=ok"), std::string::npos) << b.out() << b.err();
    EXPECT_EQ(faults(dir, b.pid()), 0) << read_text(dir / "fake.log");
    // It waited for the grant: the memset ran after the holder's kernels.
    const auto work = read_work(dir / "fake.log");
    const auto escaped = work_of(work_named(work, "fakecuda_escape_memset"), b.pid());
    const auto held = work_of(work_named(work, "cuLaunch"), a.pid());
    ASSERT_EQ(escaped.size(), 1u) << read_text(dir / "fake.log");
    ASSERT_EQ(held.size(), 8u) << read_text(dir / "fake.log");
    EXPECT_GE(escaped[0].start, held.back().end) << read_text(dir / "fake.log");
}

// The same for a small allocation that lands in a slab already made, whose
// memory was swapped out: b's slab leaves the GPU when b lets go
// (NVSHARE_EVICT=1) during its pause, while a holds it; b's next allocation
// is a block of that slab and waits for the grant that brings it back.
TEST(Allocation, ABlockOfASwappedOutSlabWaitsForTheGrant)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--time-quantum", "10min"});
    const std::string resume = dir / "resume";
    Process b =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "1", "--alloc", "64K", "--escape-after-alloc", "--rounds", "2",
                       "--pause-until", resume, "--alloc-each-round", "64K"},
                      {{"NVSHARE_EVICT", "1"}, {"NVSHARE_DEBUG", "1"}},
                      false},
                     "b");
    ASSERT_TRUE(launched_one(dir, b)) << b.out() << b.err();
    Process a = start_client(dir, daemon.socket(),
                             {{"--kernels", "8", "--kernel-us", "50000"}, {}, false}, "a");
    ASSERT_TRUE(launched_one(dir, a)) << a.out() << a.err();
    ASSERT_TRUE(wait_until([&] { return b.err().find("swapped out ") != std::string::npos; }))
        << b.err();
    touch(resume);
    expect_clean_exit(a);
    expect_clean_exit(b);
    EXPECT_EQ(count_lines_containing(b.out(), "escape=0 "), 2) << b.out() << b.err();
    EXPECT_EQ(faults(dir, b.pid()), 0) << read_text(dir / "fake.log");
    EXPECT_EQ(count_events(dir / "fake.log", b.pid(), "alloc vmm 8388608"), 2)
        << "one slab, made and swapped in again\n"
        << read_text(dir / "fake.log");
}

// An allocation made while the process holds a GPU that is physically full
// (here: the fake's 512 MiB, where nvshared counts 1 GiB, as when another
// process's memory fills the rest) lives in host memory, mapped where the
// program sees it, never in managed memory (whose faults the driver cannot
// serve on a GPU full of memory it cannot evict).
TEST(SwapEngine, AllocationOnAFullGpuLivesInHostMemory)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--capacity", "1G"});
    Process p = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--alloc", "300M", "--late-alloc", "300M",
                               "--check-data", "--hold-ms", "100"},
                              {{"FAKECUDA_MEMORY", std::to_string(512ull << 20)}},
                              false},
                             "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("late=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_NE(p.out().find("data=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_EQ(faults(dir, p.pid()), 0) << read_text(dir / "fake.log");
    const std::string log = dir / "fake.log";
    EXPECT_GE(count_events(log, p.pid(), "alloc vmm-host"), 2) << read_text(log);
    EXPECT_EQ(count_events(log, p.pid(), "alloc managed"), 0) << read_text(log);
}

// No placement takes the last of the device: the driver needs device memory
// beside every allocation (here: the fake's streams), and a program that
// sees nvshared's capacity cannot know the device is full. The late
// allocation would fill the fake's 512 MiB exactly (beside the swap engine's
// stream, 2 MiB as the fake counts one); a stream made after it must still
// find room (without the reserve: out of memory, as on a GPU whose memory
// a revoked holder's running work keeps).
TEST(SwapEngine, APlacementLeavesTheDriverRoomForAStream)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--capacity", "1G"});
    Process p = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--alloc", "128M", "--late-alloc", "382M",
                               "--late-stream", "--check-data", "--hold-ms", "100"},
                              {{"FAKECUDA_MEMORY", std::to_string(512ull << 20)}},
                              false},
                             "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("late=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_NE(p.out().find("late-stream=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_NE(p.out().find("data=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_EQ(faults(dir, p.pid()), 0) << read_text(dir / "fake.log");
}

// Sharing the GPU (auto mode, memory fits as nvshared counts it), an
// allocation that finds the device full does not pin host memory: what has
// no room waits for the next grant, and the process lets go at once (the
// others' memory may be what fills it); its work waits at the gate, and the
// grant gives the memory (here the fake's 512 MiB are still full: host
// memory).
TEST(SwapEngine, AnAllocationThatFindsASharedGpuFullWaitsForTheNextGrant)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    Process p =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "1", "--alloc", "300M", "--late-alloc", "300M", "--check-data",
                       "--hold-ms", "100"},
                      {{"FAKECUDA_MEMORY", std::to_string(512ull << 20)}, {"NVSHARE_DEBUG", "1"}},
                      false},
                     "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("late=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_NE(p.out().find("data=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_EQ(faults(dir, p.pid()), 0) << read_text(dir / "fake.log");
    const std::string err = p.err();
    const size_t full = err.find("GPU 0 is full while shared");
    ASSERT_NE(full, std::string::npos) << err;
    const size_t released = err.find("released: the GPU is full while shared", full);
    ASSERT_NE(released, std::string::npos) << err;
    EXPECT_NE(err.find("lock granted", released), std::string::npos) << err;
    EXPECT_GE(count_events(dir / "fake.log", p.pid(), "alloc vmm-host"), 1)
        << read_text(dir / "fake.log");
}

// A process that holds a GPU it shared learns when the GPU comes to be taken
// in turns (a Contended notice with kGrantExclusive): an allocation that
// then finds the GPU full waits in host memory for room, as any holder's
// does, instead of letting go as one sharing the GPU does (which handed the
// GPU to the other process in the middle of its work).
TEST(SwapEngine, AHolderToldThatTurnsBeganNoLongerLetsGoForRoom)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    const std::string turns = dir / "turns";
    Process holder =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "1", "--alloc", "300M", "--check-data", "--late-alloc", "300M",
                       "--late-alloc-after", turns},
                      {{"FAKECUDA_MEMORY", std::to_string(512ull << 20)},
                       {"NVSHARE_DEBUG", "1"},
                       {"NVSHARE_IDLE_RELEASE_MS", "0"}},  // it holds through its pause
                      false},
                     "holder");
    ASSERT_TRUE(launched_one(dir, holder)) << holder.err();
    // 300 + 800 MiB exceed the capacity: turns begin, the holder keeps the GPU.
    Process other = start_client(dir, daemon.socket(),
                                 {{"--kernels", "1", "--alloc", "800M"}, {}, false}, "other");
    EXPECT_TRUE(wait_until([&] {
        return holder.err().find("taken in turns now") != std::string::npos;
    })) << holder.err();
    touch(turns);
    expect_clean_exit(holder, seconds(180));
    expect_clean_exit(other, seconds(180));
    EXPECT_NE(holder.out().find("late=ok"), std::string::npos) << holder.out() << holder.err();
    EXPECT_NE(holder.out().find("data=ok"), std::string::npos) << holder.out() << holder.err();
    EXPECT_EQ(faults(dir, holder.pid()), 0) << read_text(dir / "fake.log");
    const std::string err = holder.err();
    EXPECT_NE(err.find("GPU 0 is full: "), std::string::npos) << err;
    EXPECT_EQ(err.find("full while shared"), std::string::npos) << err;
    EXPECT_EQ(err.find("released"), std::string::npos) << err;
}

// Granted into a group turn (the processes' memory oversubscribes the GPU,
// its group's fits), an allocation that finds the device full waits for the
// room nvshared asks of those who wait, as a holder alone does, instead of
// letting go as one sharing a GPU that fits does (letting go would swap a
// growing newcomer's data out and in for every block it allocates).
// Here no room comes (the fake's memory is the process's own): after its
// wait the rest goes to host memory, and the process never lets go.
TEST(SwapEngine, AHolderInAGroupTurnWaitsForRoomInsteadOfLettingGo)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    const std::string end = dir / "end";
    Process busy = start_client(dir, daemon.socket(),
                                {{"--kernels", "1", "--alloc", "300M", "--until", end},
                                 {{"NVSHARE_IDLE_RELEASE_MS", "0"}},
                                 false},
                                "busy");
    ASSERT_TRUE(launched_one(dir, busy)) << busy.err();
    // Idle from its first round on; with the grower's 300 MiB, 1.2 GiB.
    Process idle = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "600M", "--pause-until", end}, {}, false}, "idle");
    ASSERT_TRUE(launched_one(dir, idle)) << idle.err();
    Process grower =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "1", "--alloc", "300M", "--check-data", "--late-alloc", "200M"},
                      {{"FAKECUDA_MEMORY", std::to_string(400ull << 20)},
                       {"NVSHARE_DEBUG", "1"},
                       {"NVSHARE_IDLE_RELEASE_MS", "0"}},
                      false},
                     "grower");
    expect_clean_exit(grower, seconds(120));
    touch(end);
    expect_clean_exit(busy);
    expect_clean_exit(idle);
    EXPECT_NE(grower.out().find("late=ok"), std::string::npos) << grower.out() << grower.err();
    EXPECT_NE(grower.out().find("data=ok"), std::string::npos) << grower.out() << grower.err();
    EXPECT_EQ(faults(dir, grower.pid()), 0) << read_text(dir / "fake.log");
    // Its grant was a group turn's: beside busy.
    const std::string log = daemon.log(), pid = "pid " + std::to_string(grower.pid()) + " (";
    bool shared_grant = false;
    for (size_t at = log.find(pid); at != std::string::npos; at = log.find(pid, at + 1)) {
        const std::string line = log.substr(at, log.find('\n', at) - at);
        shared_grant |=
            line.find("granted") != std::string::npos && line.find(", shared") != std::string::npos;
    }
    EXPECT_TRUE(shared_grant) << log;
    const std::string err = grower.err();
    EXPECT_NE(err.find("GPU 0 is full: "), std::string::npos) << err;
    EXPECT_EQ(err.find("full while shared"), std::string::npos) << err;
    EXPECT_EQ(err.find("released"), std::string::npos) << err;
}

struct WaiterAndHolder {
    Process waiter, holder;
};

// 1 (200 MiB: chunks of 64, 64, 64 and 8 MiB, with a pattern) runs, then 2
// (900 MiB, with `holder_args` and `holder_env`) takes the GPU and holds it
// through its pause (until expect_both_end_and_the_waiter_keeps_its_data);
// 1 lets go keeping what fits beside 2, then waits for the GPU again, and
// has made host memory for all four chunks when this returns.
void start_a_waiter_that_makes_host_memory_ahead(
    const TempDir& dir, const Daemon& daemon, const std::map<std::string, std::string>& waiter_env,
    const std::vector<std::string>& holder_args, WaiterAndHolder& p,
    const std::map<std::string, std::string>& holder_env = {})
{
    const std::string go_on = dir / "go-on";
    ClientRun waiter{{"--kernels", "1", "--alloc", "200M", "--check-data", "--pause-until", go_on,
                      "--rounds", "2"},
                     {{"NVSHARE_DEBUG", "1"}},
                     false};
    waiter.env.insert(waiter_env.begin(), waiter_env.end());
    p.waiter = start_client(dir, daemon.socket(), waiter, "waiter");
    ASSERT_TRUE(launched_one(dir, p.waiter)) << p.waiter.err();
    ClientRun holder{
        {"--kernels", "1", "--alloc", "900M", "--pause-until", dir / "holder-go"},
        {{"NVSHARE_DEBUG", "1"}, {"NVSHARE_IDLE_RELEASE_MS", "0"}},  // holds through its pause
        false};
    holder.args.insert(holder.args.end(), holder_args.begin(), holder_args.end());
    for (const auto& [name, value] : holder_env)
        holder.env[name] = value;
    p.holder = start_client(dir, daemon.socket(), holder, "holder");
    ASSERT_TRUE(wait_until([&] {
        return p.holder.err().find("lock granted") != std::string::npos;
    })) << p.holder.err()
        << p.waiter.err();
    touch(go_on);  // the waiter asks for the GPU again and waits
    ASSERT_TRUE(wait_until([&] {
        return count_events(dir / "fake.log", p.waiter.pid(), "host-register") >= 4;
    })) << p.waiter.err()
        << read_text(dir / "fake.log");
}

void expect_both_end_and_the_waiter_keeps_its_data(const TempDir& dir, WaiterAndHolder& p)
{
    touch(dir / "holder-go");
    expect_clean_exit(p.holder, seconds(180));
    expect_clean_exit(p.waiter, seconds(180));
    EXPECT_NE(p.waiter.out().find("data=ok"), std::string::npos)
        << p.waiter.out() << p.waiter.err();
    EXPECT_EQ(faults(dir, p.waiter.pid()), 0) << read_text(dir / "fake.log");
}

// A process that waits for an oversubscribed GPU makes host memory ahead
// for what it left there (up to 2 GiB), so that a holder that grows gets
// that room at the bus's speed. Here 1 (200 MiB: chunks of 64, 64, 64 and
// 8 MiB) let go for 2 (900 MiB) keeping what fitted beside it, then waits
// while 2 holds: host memory for all four chunks is made although nobody
// asked for room yet.
TEST(SwapEngine, AWaiterOnAnOversubscribedGpuMakesHostMemoryAhead)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    WaiterAndHolder p;
    ASSERT_NO_FATAL_FAILURE(start_a_waiter_that_makes_host_memory_ahead(dir, daemon, {}, {}, p));
    EXPECT_EQ(p.waiter.err().find("nvshared asks for room"), std::string::npos) << p.waiter.err();
    expect_both_end_and_the_waiter_keeps_its_data(dir, p);
}

// /proc/meminfo as a client sees it (ClientRun::meminfo): a host of 64 GiB
// with `available_kb` available.
std::string meminfo_of_64g(uint64_t available_kb)
{
    return "MemTotal:       67108864 kB\nMemFree:          102400 kB\nMemAvailable:   " +
           std::to_string(available_kb) + " kB\n";
}

// Where the host has less memory available than its reserve (1/32 of it),
// the swap engine pins none: the pair's swap-outs leave their data on the
// GPU, say why, and every result stays right.
TEST(SwapEngine, AHostLowOnMemoryPinsNothing)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root for a private mount namespace";
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "512M"});
    ClientRun run{{"--kernels", "20", "--kernel-us", "50000", "--alloc", "350M", "--check-data",
                   "--hold-ms", "300"},
                  {{"NVSHARE_DEBUG", "1"},
                   {kMeminfoText, meminfo_of_64g(1024 * 1024)}},  // 1 GiB of 64: below 2
                  false};
    Pair p = run_pair(dir, daemon.socket(), run);
    expect_clean_exit(p.a, seconds(240));
    expect_clean_exit(p.b, seconds(240));
    std::string said;
    for (Process* c : {&p.a, &p.b}) {
        EXPECT_NE(c->out().find("data=ok"), std::string::npos) << c->out() << c->err();
        EXPECT_EQ(faults(dir, c->pid()), 0) << read_text(dir / "fake.log");
        EXPECT_EQ(count_events(dir / "fake.log", c->pid(), "host-register"), 0) << c->err();
        said += c->err();
    }
    EXPECT_NE(said.find("the host runs low on memory: "), std::string::npos) << said;
    EXPECT_NE(said.find("MiB of data stay on GPU 0, not swapped out"), std::string::npos) << said;
}

// The rates a process measures as its memory moves (here 1.1 GiB each way
// at every switch, NVSHARE_EVICT=1), each the better of its last two moves,
// reach nvshared, which hands them to the next process of the GPU, whose
// first switch is then costed at them. The two take turns in the pauses
// between their rounds, one pause at a time: each swaps out three times
// (its first swap-out, spent pinning, sets no rate) and in three times.
TEST(SwapEngine, RatesMeasuredByOneProcessReachTheNext)
{
    // The host as the swap engine sees it has plenty (48 GiB of 64): what
    // it made stays, however loaded the machine running the test is.
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root for a private mount namespace";
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--capacity", "2G"});
    const auto run = [&](const std::string& name) {
        return start_client(dir, daemon.socket(),
                            {{"--kernels", "2", "--kernel-us", "50000", "--alloc", "1100M",
                              "--rounds", "4", "--pauses-until", dir / (name + "-go")},
                             {{"NVSHARE_EVICT", "1"},
                              {"NVSHARE_DEBUG", "1"},
                              {kMeminfoText, meminfo_of_64g(48ull * 1024 * 1024)}},
                             false},
                            name);
    };
    Process a = run("a");
    Process b = run("b");
    // Both ran their first round, the second once the first let go; the
    // second holds the GPU through its pause, so the first goes on first.
    const auto released = [](const Process& p) {
        return p.err().find("released early") != std::string::npos;
    };
    ASSERT_TRUE(wait_until([&] {
        return count_lines_containing(a.err(), "lock granted") >= 1 &&
               count_lines_containing(b.err(), "lock granted") >= 1 && (released(a) || released(b));
    })) << a.err()
        << b.err();
    const bool a_first = released(a);
    for (int r = 1; r <= 3; ++r)
        for (Process* p : {a_first ? &a : &b, a_first ? &b : &a}) {
            const std::string name = p == &a ? "a" : "b";
            touch(dir / (name + "-go." + std::to_string(r)));
            ASSERT_TRUE(wait_until([&] {
                return count_lines_containing(p->err(), "swapped in ") >= r;
            })) << name
                << " round " << r + 1 << "\n"
                << a.err() << b.err();
        }
    expect_clean_exit(a, seconds(120));
    expect_clean_exit(b, seconds(120));
    const auto status = daemon.status();
    ASSERT_EQ(status["gpus"].size(), 1u) << status.dump(2);
    const auto rates = status["gpus"][0]["rates"];
    for (const char* figure : {"engine_out", "engine_in"}) {
        EXPECT_GE(rates[figure].get<uint64_t>(), nvshare::proto::kMinRate)
            << rates.dump() << a.err() << b.err();
        EXPECT_LE(rates[figure].get<uint64_t>(), nvshare::proto::kMaxRate) << rates.dump();
    }
    Process c = start_client(dir, daemon.socket(),
                             {{"--kernels", "1"}, {{"NVSHARE_DEBUG", "1"}}, false}, "c");
    expect_clean_exit(c);
    EXPECT_NE(c.err().find("rates earlier processes measured on GPU 0: "), std::string::npos)
        << c.err();
}

// An allocation that finds no room on the GPU while the process holds it,
// on a host with nothing left to pin (1 GiB available of 64: below the
// reserve), fails with CUDA_ERROR_OUT_OF_MEMORY and one line that names
// what ran out: no host memory beyond the budget, no managed memory (which
// faulted on a full GPU), nothing left unmapped.
TEST(SwapEngine, AnAllocationWithNoRoomOnTheGpuNorTheHostIsOutOfMemory)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root for a private mount namespace";
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    Process p = start_client(dir, daemon.socket(),
                             {{"--kernels", "1", "--alloc", "300M", "--late-alloc", "300M"},
                              {{"FAKECUDA_MEMORY", std::to_string(512ull << 20)},
                               {kMeminfoText, meminfo_of_64g(1024 * 1024)}},
                              false},
                             "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("late=oom"), std::string::npos) << p.out() << p.err();
    EXPECT_NE(p.err().find("out of memory: 314572800 bytes found no room on GPU 0 nor in the "
                           "host memory nvshare may pin"),
              std::string::npos)
        << p.err();
    const std::string log = read_text(dir / "fake.log");
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc vmm-host"), 0) << log;
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc managed"), 0) << log;
    EXPECT_EQ(faults(dir, p.pid()), 0) << log;
}

// While the host runs low on memory, host memory kept only for data that is
// on the GPU goes back. The waiter of AWaiterOnAnOversubscribedGpuMakesHost-
// MemoryAhead made host memory ahead for the chunks it kept beside the
// holder; then the host runs low (6 GiB of 64 available: pinning is still
// allowed), the holder grows, nvshared asks the waiter for room, and its
// swap-out gives back the host memory of what still stays.
TEST(SwapEngine, AHostLowOnMemoryGetsBackWhatDataOnTheGpuDoesNotNeed)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root for a private mount namespace";
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    const std::string grow = dir / "grow";
    WaiterAndHolder p;
    ASSERT_NO_FATAL_FAILURE(start_a_waiter_that_makes_host_memory_ahead(
        dir, daemon, {{kMeminfoText, meminfo_of_64g(48ull * 1024 * 1024)}},
        {"--late-alloc", "64M", "--late-alloc-after", grow}, p));
    EXPECT_EQ(p.waiter.err().find("gave back"), std::string::npos) << p.waiter.err();
    write_text(dir / "waiter.meminfo", meminfo_of_64g(6ull * 1024 * 1024));  // in place
    touch(grow);
    EXPECT_TRUE(wait_until([&] {
        return p.waiter.err().find("the host runs low on memory: gave back") != std::string::npos;
    })) << p.waiter.err();
    expect_both_end_and_the_waiter_keeps_its_data(dir, p);
    EXPECT_NE(p.waiter.err().find("nvshared asks for room"), std::string::npos) << p.waiter.err();
}

// A holder contended on an oversubscribed GPU makes the host memory of its
// next switch only once one is likely. The holder of AWaiterOnAnOversub-
// scribedGpuMakesHostMemoryAhead never lets go in a pause (its idle period
// is 0): with nvshared's quantum of 30 s no switch is likely for 28 s, and
// it makes none (made for nothing, it would only slow its exit: the driver
// unpins it before it gives the device memory back to the next holder);
// with a quantum of 4 s, it begins to make it before the quantum's end (how
// soon before follows the measured pinning rate: twice the time making it
// takes and 1 s).
TEST(SwapEngine, AHolderMakesHostMemoryForItsSwitchOnlyOnceOneIsLikely)
{
    for (const char* quantum : {"30s", "4s"}) {
        SCOPED_TRACE(quantum);
        TempDir dir;
        Daemon daemon(dir,
                      {"--anti-thrashing", "auto", "--capacity", "1G", "--time-quantum", quantum});
        WaiterAndHolder p;
        ASSERT_NO_FATAL_FAILURE(
            start_a_waiter_that_makes_host_memory_ahead(dir, daemon, {}, {}, p));
        constexpr const char* kLikely = "a switch is likely (our time quantum ends soon)";
        if (std::string(quantum) == "30s") {
            std::this_thread::sleep_for(seconds(2));
            EXPECT_EQ(p.holder.err().find(kLikely), std::string::npos) << p.holder.err();
            EXPECT_EQ(p.holder.err().find(kMadeAhead), std::string::npos) << p.holder.err();
            EXPECT_EQ(count_events(dir / "fake.log", p.holder.pid(), "host-register"), 0)
                << read_text(dir / "fake.log");
        } else {
            ASSERT_TRUE(wait_until([&] {
                return p.holder.err().find("drop requested") != std::string::npos;
            })) << p.holder.err();
            const std::string err = p.holder.err();
            const size_t likely = err.find(kLikely);
            EXPECT_NE(likely, std::string::npos) << err;
            if (kTimingsHold) {
                EXPECT_LT(likely, err.find("drop requested")) << err;
            }
        }
        expect_both_end_and_the_waiter_keeps_its_data(dir, p);
    }
}

// While the host runs low on memory a holder makes no host memory ahead for
// its next switch: what the host has left goes to the swap-outs that give
// room (a holder that made its own down to the reserve would leave the
// others none). The holder of AWaiterOnAnOversubscribedGpuMakesHost-
// MemoryAhead, contended on an oversubscribed GPU, sees 6 GiB of 64
// available: low, though pinning is still allowed.
TEST(SwapEngine, AHolderMakesNoHostMemoryAheadWhileTheHostRunsLow)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root for a private mount namespace";
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    WaiterAndHolder p;
    ASSERT_NO_FATAL_FAILURE(start_a_waiter_that_makes_host_memory_ahead(
        dir, daemon, {}, {}, p, {{kMeminfoText, meminfo_of_64g(6ull * 1024 * 1024)}}));
    expect_both_end_and_the_waiter_keeps_its_data(dir, p);
    // A smoke test: the holder may end before a prestage would begin; the
    // decision is SwitchPolicy.TheHostRunningLowEndsIt's (switch_policy_test.cpp).
    EXPECT_EQ(p.holder.err().find(kMadeAhead), std::string::npos) << p.holder.err();
}

// A holder that waits for room while the host runs low on memory gives back
// the host memory it made ahead for data that is on the GPU: those who give
// the room need host memory to swap out to (holders that kept theirs would
// leave another none, whose work then runs over the bus). Here both share
// one device of 1 GiB; the holder made its host memory ahead, then its host
// runs low and it allocates 64 MiB more, for which the device is full of
// the waiter's memory.
TEST(SwapEngine, AHolderThatWaitsForRoomWhileTheHostRunsLowGivesBackWhatItMadeAhead)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root for a private mount namespace";
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    const std::string grow = dir / "grow";
    const std::map<std::string, std::string> device{
        {"FAKECUDA_SHARED_DEVICE", dir / "device"},
        {"FAKECUDA_MEMORY", std::to_string(1ull << 30)}};
    std::map<std::string, std::string> holder_env = device;
    holder_env[kMeminfoText] = meminfo_of_64g(48ull * 1024 * 1024);
    // It makes host memory for its next switch once one is likely: here a
    // pause that outlasts its share of one, seen from its first idle look
    // (15 s after its grant); it lets go only after 15 s idle, long after
    // the making (up to 8 s under ThreadSanitizer) is done.
    holder_env["NVSHARE_IDLE_RELEASE_MS"] = "15000";
    WaiterAndHolder p;
    ASSERT_NO_FATAL_FAILURE(start_a_waiter_that_makes_host_memory_ahead(
        dir, daemon, device, {"--late-alloc", "64M", "--late-alloc-after", grow}, p, holder_env));
    ASSERT_TRUE(wait_until([&] { return p.holder.err().find(kMadeAhead) != std::string::npos; },
                           seconds(45)))
        << p.holder.err();
    write_text(dir / "holder.meminfo", meminfo_of_64g(6ull * 1024 * 1024));  // in place
    touch(grow);
    EXPECT_TRUE(wait_until([&] {
        return p.holder.err().find("the host runs low on memory: gave back") != std::string::npos;
    })) << p.holder.err();
    const std::string err = p.holder.err();
    EXPECT_NE(err.find("wait for the room others give back"), std::string::npos) << err;
    EXPECT_EQ(err.find("swapped out"), std::string::npos) << err;  // while it held
    expect_both_end_and_the_waiter_keeps_its_data(dir, p);
}

// Swapped-out memory whose grant finds no room on the GPU goes to host
// memory mapped where the program sees it (Host), its data copied there from
// where the swap-out put it. Here 1 (300 MiB, with a pattern) lets go while
// it waits for a file, for 2 (400 MiB of a 512 MiB GPU), keeping only what
// fits beside 2; then, still waiting, it allocates 200 MiB more, which get
// their device memory first at its next grant (newest first). Its device
// has only 400 MiB (the fake's, as where others' memory fills the rest):
// the last of its swapped-out chunks find no room, and its data must still
// read back.
TEST(SwapEngine, SwappedOutMemoryThatFindsNoRoomComesBackToHostMemory)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "512M"});
    const std::string go = dir / "go";
    Process first =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "1", "--alloc", "300M", "--check-data", "--late-alloc", "200M",
                       "--late-alloc-after", go},
                      {{"NVSHARE_DEBUG", "1"}, {"FAKECUDA_MEMORY", std::to_string(400ull << 20)}},
                      false},
                     "first");
    ASSERT_TRUE(launched_one(dir, first)) << first.err();
    Process second = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "400M", "--hold-ms", "500"}, {}, false}, "second");
    ASSERT_TRUE(wait_until([&] { return first.err().find("swapped out ") != std::string::npos; }))
        << first.err();
    touch(go);  // allocated while 2 holds: it waits for the next grant
    expect_clean_exit(second, seconds(180));
    expect_clean_exit(first, seconds(180));
    EXPECT_NE(first.out().find("late=ok"), std::string::npos) << first.out() << first.err();
    EXPECT_NE(first.out().find("data=ok"), std::string::npos) << first.out() << first.err();
    EXPECT_EQ(faults(dir, first.pid()), 0) << read_text(dir / "fake.log");
    // Swapped-out data moved to host memory, not only the late allocation.
    const std::string err = first.err();
    const std::string moved = " swapped-out bytes moved there): no room on GPU 0";
    unsigned long long most = 0;
    for (size_t at = err.find(moved); at != std::string::npos; at = err.find(moved, at + 1)) {
        const size_t open = err.rfind('(', at);
        ASSERT_NE(open, std::string::npos) << err;
        most = std::max(most, std::stoull(err.substr(open + 1, at - open - 1)));
    }
    EXPECT_GT(most, 0u) << err;
    EXPECT_GE(count_events(dir / "fake.log", first.pid(), "alloc vmm-host"), 1)
        << read_text(dir / "fake.log");
}

// Memory that went to host memory for want of room moves to the GPU while
// the process holds it, as soon as room appears (here: the process frees its
// first allocation), and keeps its data.
TEST(SwapEngine, HostMemoryMovesToTheGpuWhenRoomAppears)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--capacity", "1G"});
    Process p =
        start_client(dir, daemon.socket(),
                     {{"--kernels", "1", "--alloc", "300M", "--late-alloc", "300M", "--free-first",
                       "--rounds", "6", "--pause-ms", "150"},
                      {{"FAKECUDA_MEMORY", std::to_string(512ull << 20)}, {"NVSHARE_DEBUG", "1"}},
                      false},
                     "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("late=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_NE(p.out().find("late-end=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_EQ(faults(dir, p.pid()), 0) << read_text(dir / "fake.log");
    const std::string err = p.err();
    const size_t full = err.find("GPU 0 is full");
    ASSERT_NE(full, std::string::npos) << err;
    EXPECT_NE(err.find("swapped in", full), std::string::npos) << err;
    // 300 MiB = four chunks of 64 MiB and one of 44: made on the device for
    // the first allocation, and again when the late one moved there.
    EXPECT_GE(count_events(dir / "fake.log", p.pid(), "alloc vmm 67108864"), 8)
        << read_text(dir / "fake.log");
}

// The holder's chunks made in host memory, before its first swap-out, that
// came before the room had stopped growing for the patience of an
// allocation that waits for it (tuning::kAwaitRoomNs): the room grows when
// another process frees device memory, and the wait begins after the
// holder's last chunk made on the device. This holds the decision, not its
// timing: where the process asked for room answers later than the patience
// (a loaded machine), the allocation may go to host memory; sooner, it may
// not. A swap-in later waits for room less long (tuning::kRoomWaitNs).
int host_chunks_before_patience(const TempDir& dir, pid_t holder)
{
    constexpr uint64_t kLogSlackNs = 50'000'000;  // a poll may see a free just before its line
    uint64_t since = 0;
    int early = 0;
    for (const Event& e : read_events(dir / "fake.log")) {
        if (e.pid == holder && e.what.starts_with("unmap"))
            break;
        if (e.pid == holder && e.what.starts_with("alloc vmm ")) {
            since = e.ns;
        } else if (e.pid != holder && e.what.starts_with("free vmm")) {
            since = e.ns;
        } else if (e.pid == holder && e.what.starts_with("alloc vmm-host") &&
                   e.ns + kLogSlackNs < since + tuning::kAwaitRoomNs) {
            ++early;
        }
    }
    return early;
}

// "idle" lets go after its first kernel with 200 MiB and waits until
// nvshared has asked it for room and it gave it (its log shows `gave`: all
// 200 MiB by default); "grows" then holds the GPU with 200 MiB and allocates
// 300 MiB more. Both end with their data checked; `env` is added to both
// environments.
struct IdleAndGrower {
    Process idle, grows;
};
IdleAndGrower run_idle_and_grower(const TempDir& dir, const Daemon& daemon,
                                  std::map<std::string, std::string> env,
                                  const std::string& gave = "swapped out 209715200 bytes")
{
    env["NVSHARE_DEBUG"] = "1";
    const std::string given = dir / "given";
    Process idle = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "200M", "--check-data", "--pause-until", given}, env, false},
        "idle");
    EXPECT_TRUE(launched_one(dir, idle)) << idle.err();
    Process grows = start_client(dir, daemon.socket(),
                                 {{"--kernels", "1", "--alloc", "200M", "--late-alloc", "300M",
                                   "--check-data", "--hold-ms", "500"},
                                  env,
                                  false},
                                 "grows");
    EXPECT_TRUE(
        wait_until([&] { return idle.err().find(gave) != std::string::npos; }, seconds(180)))
        << idle.err();
    touch(given);
    expect_clean_exit(grows, seconds(180));
    expect_clean_exit(idle, seconds(180));
    for (Process* c : {&idle, &grows}) {
        EXPECT_NE(c->out().find("data=ok"), std::string::npos) << c->out() << c->err();
        EXPECT_EQ(faults(dir, c->pid()), 0) << read_text(dir / "fake.log");
    }
    EXPECT_NE(grows.out().find("late=ok"), std::string::npos) << grows.out() << grows.err();
    return {std::move(idle), std::move(grows)};
}

// A process that holds the GPU and grows makes nvshared ask a process that
// does not hold it for room (Shrink): the idle one moves its memory to host
// memory at once, while it waits, and finds its data intact later. Here 1
// let go while everything fitted (400 MiB of 512), keeping all of its
// 200 MiB; then 2 allocates 300 MiB more while it holds the GPU. 1 stays
// idle until it has given the room back, then checks its data.
TEST(SwapEngine, AProcessThatDoesNotHoldTheGpuGivesBackTheRoomTheHolderNeeds)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--capacity", "512M"});
    const IdleAndGrower p = run_idle_and_grower(dir, daemon, {});
    // 512 MiB less the holder's 500 leave 12 MiB, less than the engine's
    // headroom: all 200 MiB move, while the idle process waits for nothing.
    const std::string err = p.idle.err();
    const size_t asked = err.find("nvshared asks for room: leaving at most 12 MiB");
    ASSERT_NE(asked, std::string::npos) << err;
    EXPECT_NE(err.find("swapped out 209715200 bytes", asked), std::string::npos) << err;
    EXPECT_NE(err.find("swapped in 209715200 bytes", asked), std::string::npos) << err;
}

// The same on one device of 512 MiB that both share: the holder's late
// allocation finds the device full of the idle process's memory. It waits
// for that room (nvshared asks the idle one to shrink) instead of pinning
// host memory for it meanwhile, which is slow and slows the other's pinning.
TEST(SwapEngine, AHolderWhoseGpuIsFullOfOthersMemoryWaitsForTheRoom)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--capacity", "512M"});
    const IdleAndGrower p =
        run_idle_and_grower(dir, daemon,
                            {{"FAKECUDA_SHARED_DEVICE", dir / "device"},
                             {"FAKECUDA_MEMORY", std::to_string(512ull << 20)}});
    EXPECT_NE(p.grows.err().find("wait for the room others give back"), std::string::npos)
        << p.grows.err();
    EXPECT_EQ(host_chunks_before_patience(dir, p.grows.pid()), 0) << read_text(dir / "fake.log");
}

// What no report counts (here each context's 200 MiB) fills the GPU before
// the reported sums do: nvshared sees room for the holder's late 300 MiB
// (200 + 200 + 300 of 1 GiB), the device has none. The holder says what it
// lacks, as the driver counts it, and nvshared asks the idle process for
// that room (Shrink), so that the late allocation gets device memory
// instead of waiting for room that never comes and going to host memory.
TEST(SwapEngine, AHolderGetsTheRoomItMeasuresItLacksBeyondTheReportedSums)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on", "--capacity", "1G"});
    const IdleAndGrower p =
        run_idle_and_grower(dir, daemon,
                            {{"FAKECUDA_SHARED_DEVICE", dir / "device"},
                             {"FAKECUDA_MEMORY", std::to_string(1ull << 30)},
                             {"FAKECUDA_CONTEXT_BYTES", std::to_string(200ull << 20)}},
                            "swapped out ");
    EXPECT_NE(p.grows.err().find("asking nvshared for room"), std::string::npos) << p.grows.err();
    EXPECT_EQ(host_chunks_before_patience(dir, p.grows.pid()), 0) << read_text(dir / "fake.log");
}

// With NVSHARE_SWAP=managed device allocations are managed memory, as before.
TEST(SwapEngine, ManagedOnRequest)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    Process p = start_client(
        dir, daemon.socket(),
        {{"--kernels", "1", "--alloc", "100M"}, {{"NVSHARE_SWAP", "managed"}}, false}, "p");
    expect_clean_exit(p);
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc managed 104857600"), 1)
        << read_text(dir / "fake.log");
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc vmm "), 0);
}

// ---- one process, one nvshare (issue 18) ---------------------------------------------

// A second copy of the library under another path, as a system-wide
// install and a build under test would be.
std::string copy_of_library(const TempDir& dir)
{
    const std::string copy = dir / "libnvshare-copy.so";
    std::ifstream in(Paths::get().library, std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
    return copy;
}

int registrations(const std::string& daemon_log, pid_t pid)
{
    // "pid 42 (comm, uid 0): registered as client 3, 1 GPU(s)"
    const std::string who = "pid " + std::to_string(pid) + " (";
    int n = 0;
    std::istringstream lines(daemon_log);
    for (std::string line; std::getline(lines, line);)
        if (line.find(who) != std::string::npos &&
            line.find("): registered as client") != std::string::npos)
            ++n;
    return n;
}

TEST(Copies, TwoByLdPreloadRegisterOnceAndRunAsFastAsOne)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    ClientRun run{
        {"--kernels", "4", "--alloc", "1M"},
        {{"LD_PRELOAD", Paths::get().preload + ":" + copy_of_library(dir)}, {"NVSHARE_DEBUG", "1"}},
        false};
    Process p = start_client(dir, daemon.socket(), run, "two");
    ASSERT_EQ(p.wait(), 0) << p.err();
    // Two active copies waited for themselves until revoked (the grace period).
    EXPECT_EQ(daemon.log().find("revoked the lock"), std::string::npos) << daemon.log();
    EXPECT_EQ(registrations(daemon.log(), p.pid()), 1) << daemon.log();
    EXPECT_NE(p.err().find("another copy of libnvshare.so owns this process"), std::string::npos)
        << p.err();
    EXPECT_EQ(p.err().find("two versions of libnvshare.so"), std::string::npos) << p.err();
}

// A host with nvshare installed lists its library in /etc/ld.so.preload; a
// build under test comes by LD_PRELOAD (loaded first, so it owns).
TEST(Copies, OneFromEtcLdSoPreloadAndOneByLdPreloadRegisterOnce)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root for a private mount namespace";
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    ClientRun run{{"--kernels", "4", "--alloc", "1M"}, {{"NVSHARE_DEBUG", "1"}}, false};
    Process p = start_client(dir, daemon.socket(), run, "etc", copy_of_library(dir));
    ASSERT_EQ(p.wait(), 0) << p.err();
    EXPECT_EQ(daemon.log().find("revoked the lock"), std::string::npos) << daemon.log();
    EXPECT_EQ(registrations(daemon.log(), p.pid()), 1) << daemon.log();
    EXPECT_NE(p.err().find("another copy of libnvshare.so owns this process"), std::string::npos)
        << p.err();
}

TEST(Copies, ACopyLoadedByDlopenStaysOut)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "on"});
    ClientRun run{
        {"--kernels", "4", "--alloc", "1M", "--dlopen-copy", copy_of_library(dir)}, {}, false};
    Process p = start_client(dir, daemon.socket(), run, "dlopen");
    ASSERT_EQ(p.wait(), 0) << p.err();
    EXPECT_NE(p.out().find("dlopen-copy=ok"), std::string::npos) << p.out();
    EXPECT_EQ(registrations(daemon.log(), p.pid()), 1) << daemon.log();
    // The copy's allocation reached the driver untouched: plain device memory.
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc device 12345"), 1);
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc managed 12345"), 0);
}

}  // namespace
}  // namespace nvshare::test
