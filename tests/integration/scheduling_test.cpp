// The lock as real client processes see it: first come first served, holds
// that never overlap, time-quantum drops, revocation after the grace period,
// a holder killed while holding, the three modes, several GPUs, and identity
// taken from the socket rather than from what a client claims.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "common/protocol.h"
#include "tests/integration/test_client.h"
#include "tests/support/daemon.h"

namespace nvshare::test {
namespace {

uint64_t ns_of(TestClient& c, const std::string& name)
{
    const auto e = c.wait_for(name);
    EXPECT_TRUE(e) << "no '" << name << "' from client " << c.pid() << ":\n" << c.transcript();
    return e ? e->ns : 0;
}

uint64_t id_of(TestClient& c)
{
    const auto e = c.wait_for("welcome");
    EXPECT_TRUE(e);
    return e ? std::stoull(e->details.substr(e->details.find("id=") + 3)) : 0;
}

bool has_flag(const Event& grant, unsigned flag)
{
    const auto at = grant.details.find("flags=");
    return at != std::string::npos && (std::stoul(grant.details.substr(at + 6)) & flag) != 0;
}

TEST(Scheduling, FirstComeFirstServed)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on"}));
    TestClient holder(d.socket(), {"--hold-until-stdin"});
    ASSERT_TRUE(holder.wait_for("grant"));
    // Three waiters, each queued (as the daemon's status shows) before the next starts.
    std::vector<std::unique_ptr<TestClient>> waiters;
    std::vector<uint64_t> ids;
    for (int i = 0; i < 3; ++i) {
        waiters.push_back(std::make_unique<TestClient>(d.socket(), std::vector<std::string>{}));
        ids.push_back(id_of(*waiters.back()));
        ASSERT_FALSE(d.wait_client_state(waiters.back()->pid(), "waiting").is_null());
    }
    const auto s = d.status();
    EXPECT_EQ(s["gpus"][0]["queue"], nlohmann::json(ids));

    holder.proceed();
    EXPECT_EQ(holder.finish(), 0);
    uint64_t previous_release = holder.events_named("released").at(0).ns;
    for (auto& w : waiters) {
        EXPECT_EQ(w->finish(), 0);
        const auto grant = w->events_named("grant");
        ASSERT_EQ(grant.size(), 1u) << w->transcript();
        EXPECT_GT(grant[0].ns, previous_release) << "granted out of order";
        previous_release = w->events_named("released").at(0).ns;
    }
}

TEST(Scheduling, HoldsOfManyProcessesNeverOverlap)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on"}));
    std::vector<std::unique_ptr<TestClient>> clients;
    for (int i = 0; i < 4; ++i)
        clients.push_back(std::make_unique<TestClient>(
            d.socket(), std::vector<std::string>{"--cycles", "15", "--hold", "1ms"}));
    struct Hold {
        uint64_t from, to;
        pid_t pid;
    };
    std::vector<Hold> holds;
    for (auto& c : clients) {
        ASSERT_EQ(c->finish(), 0) << c->transcript();
        const auto grants = c->events_named("grant");
        const auto releases = c->events_named("released");
        ASSERT_EQ(grants.size(), 15u);
        ASSERT_EQ(releases.size(), 15u);
        for (size_t i = 0; i < grants.size(); ++i)
            holds.push_back({grants[i].ns, releases[i].ns, c->pid()});
    }
    std::sort(holds.begin(), holds.end(),
              [](const Hold& a, const Hold& b) { return a.from < b.from; });
    for (size_t i = 1; i < holds.size(); ++i)
        EXPECT_GT(holds[i].from, holds[i - 1].to)
            << "pid " << holds[i].pid << " was granted while pid " << holds[i - 1].pid << " held";
    const auto s = d.status();
    EXPECT_EQ(s["gpus"][0]["grants"], 60);
}

TEST(Scheduling, TimeQuantumDropsOnlyWhenSomeoneWaits)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on", "--time-quantum", "300ms", "--grace", "5s"}));
    TestClient a(d.socket(), {"--hold-until-stdin"});
    ASSERT_TRUE(a.wait_for("grant"));
    // Alone, A keeps the lock past its quantum: no drop while nobody waits.
    ASSERT_FALSE(a.wait_for("drop", 600ms));
    TestClient b(d.socket(), {});
    const uint64_t b_request = ns_of(b, "request");
    ASSERT_TRUE(a.wait_for("contended"));
    const auto drop = a.wait_for("drop");
    ASSERT_TRUE(drop);
    EXPECT_GT(drop->ns, b_request);
    EXPECT_NE(drop->details.find("grace_us=5000000"), std::string::npos) << drop->details;
    // A obeys the drop; B gets the lock after A let go.
    const uint64_t a_released = ns_of(a, "released");
    EXPECT_GT(ns_of(b, "grant"), a_released);
    EXPECT_EQ(b.finish(), 0);
    a.close_stdin();
    EXPECT_EQ(a.finish(), 0);
    EXPECT_FALSE(a.wait_for("revoked", 0ms));
}

TEST(Scheduling, RevokesAHolderThatIgnoresTheDrop)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on", "--time-quantum", "200ms", "--grace", "300ms"}));
    TestClient stubborn(d.socket(), {"--hold-until-stdin", "--ignore-drop"});
    ASSERT_TRUE(stubborn.wait_for("grant"));
    TestClient next(d.socket(), {});
    const uint64_t drop = ns_of(stubborn, "drop");
    const uint64_t revoked = ns_of(stubborn, "revoked");
    EXPECT_GT(revoked, drop);
    // Revoked and the next Grant leave the daemon together, so which process
    // reads its frame first is open; the Grant still comes a grace period
    // (300 ms) after the Drop.
    EXPECT_GT(ns_of(next, "grant"), drop);
    EXPECT_EQ(next.finish(), 0);
    // The revoked client exits with its own code and never sent Released.
    EXPECT_EQ(stubborn.finish(), 4);
    EXPECT_TRUE(stubborn.events_named("released").empty());
    EXPECT_NE(d.log().find("revoked the lock"), std::string::npos);
}

TEST(Scheduling, RevokedHolderStatisticsAreKept)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on", "--time-quantum", "100ms", "--grace", "100ms"}));
    TestClient stubborn(d.socket(), {"--hold-until-stdin", "--ignore-drop", "--cycles", "2"});
    ASSERT_TRUE(stubborn.wait_for("grant"));
    TestClient waiter(d.socket(), {"--hold-until-stdin"});
    ASSERT_TRUE(stubborn.wait_for("revoked"));
    ASSERT_TRUE(waiter.wait_for("grant"));
    const auto c = d.wait_status([&](const nlohmann::json& s) {
        const auto me = Daemon::client_by_pid(s, stubborn.pid());
        return !me.is_null() && me["revocations"] == 1 && me["drops"] == 1;
    });
    EXPECT_FALSE(c.is_null());
    waiter.proceed();
    EXPECT_EQ(waiter.finish(), 0);
    stubborn.close_stdin();
    EXPECT_EQ(stubborn.finish(), 4);
}

TEST(Scheduling, HolderKilledWhileHoldingFreesTheLock)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on"}));
    TestClient victim(d.socket(), {"--hold-until-stdin"});
    ASSERT_TRUE(victim.wait_for("grant"));
    TestClient waiter(d.socket(), {});
    ASSERT_FALSE(d.wait_client_state(waiter.pid(), "waiting").is_null());
    const pid_t victim_pid = victim.pid();
    victim.kill(SIGKILL);
    EXPECT_EQ(victim.finish(), 128 + SIGKILL);
    ASSERT_TRUE(waiter.wait_for("grant"));
    EXPECT_EQ(waiter.finish(), 0);
    const auto s = d.wait_status([](const nlohmann::json& st) { return st["clients"].empty(); });
    EXPECT_TRUE(Daemon::client_by_pid(s, victim_pid).is_null());
    EXPECT_EQ(d.stop(), 0);
}

// A holder that exits without a Release, its connection closing while its
// process exits, which ends `linger` later; another client waits for its
// GPU. When the connection closed and when the other got the GPU, in
// nanoseconds; then the exiting process is killed (if it has not ended) and
// its exit status returned.
struct ExitRun {
    uint64_t closed_ns = 0;
    uint64_t granted_ns = 0;
    int exit_status = -1;
};

ExitRun run_exiting_holder(const std::string& linger)
{
    ExitRun run;
    Daemon d;
    EXPECT_TRUE(d.start({"--anti-thrashing", "on"}));
    TestClient exiting(d.socket(), {"--hold-until-stdin", "--exit-slowly", linger});
    EXPECT_TRUE(exiting.wait_for("grant"));
    TestClient waiter(d.socket(), {});
    EXPECT_FALSE(d.wait_client_state(waiter.pid(), "waiting").is_null());
    exiting.proceed();
    const auto closing = exiting.wait_for("closing");
    const auto grant = waiter.wait_for("grant", Millis(30000));
    EXPECT_TRUE(closing) << exiting.transcript();
    EXPECT_TRUE(grant) << waiter.transcript();
    run.closed_ns = closing ? closing->ns : 0;
    run.granted_ns = grant ? grant->ns : 0;
    EXPECT_EQ(waiter.finish(), 0);
    exiting.kill(SIGKILL);
    run.exit_status = exiting.finish();
    EXPECT_EQ(d.stop(), 0);
    return run;
}

// The driver gives a process's GPU memory back only as the process ends,
// after its connection closed: a holder whose process exits keeps its GPUs
// until it has ended (here 1.5 s after its connection closed), so the next
// holder finds the room it was counted.
TEST(Scheduling, AnExitingHolderKeepsItsGpusUntilItsProcessHasEnded)
{
    const ExitRun run = run_exiting_holder("1500ms");
    EXPECT_EQ(run.exit_status, 0) << "it ended on its own before the grant";
    // Not before the process ended, 1.5 s after closing; and at its end, not
    // at the 10 s bound.
    EXPECT_GE(run.granted_ns, run.closed_ns + 1500000000ull);
    EXPECT_LT(run.granted_ns, run.closed_ns + 9000000000ull);
}

// An exit that does not end (stuck in the driver) keeps the GPUs 10 s at
// most.
TEST(Scheduling, AnExitThatDoesNotEndKeepsTheGpusTenSecondsAtMost)
{
    const ExitRun run = run_exiting_holder("60s");
    EXPECT_EQ(run.exit_status, 128 + SIGKILL) << "it was still exiting after the grant";
    EXPECT_GE(run.granted_ns, run.closed_ns + 10000000000ull);
}

TEST(Scheduling, ModeOffLetsEverybodyRunAtOnce)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "off"}));
    TestClient a(d.socket(), {"--hold-until-stdin"});
    TestClient b(d.socket(), {"--hold-until-stdin"});
    const auto ga = a.wait_for("grant");
    const auto gb = b.wait_for("grant");
    ASSERT_TRUE(ga && gb);
    EXPECT_FALSE(has_flag(*ga, proto::kGrantExclusive));
    EXPECT_FALSE(has_flag(*gb, proto::kGrantExclusive));
    const auto s = d.status();
    EXPECT_EQ(s["gpus"][0]["holders"].size(), 2u);
    EXPECT_EQ(s["gpus"][0]["serializing"], false);
    a.proceed();
    b.proceed();
    EXPECT_EQ(a.finish(), 0);
    EXPECT_EQ(b.finish(), 0);
}

TEST(Scheduling, ModeOnSerializesEvenWithMemoryToSpare)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on", "--capacity", "1G"}));
    TestClient a(d.socket(), {"--hold-until-stdin", "--mem", "0=1M"});
    const auto ga = a.wait_for("grant");
    ASSERT_TRUE(ga);
    EXPECT_TRUE(has_flag(*ga, proto::kGrantExclusive));
    TestClient b(d.socket(), {"--mem", "0=1M"});
    ASSERT_FALSE(d.wait_client_state(b.pid(), "waiting").is_null());
    a.proceed();
    const uint64_t released = ns_of(a, "released");
    EXPECT_GT(ns_of(b, "grant"), released);
    EXPECT_EQ(a.finish(), 0);
    EXPECT_EQ(b.finish(), 0);
}

TEST(Scheduling, ModeAutoTakesTurnsOfGroupsOnlyWhenMemoryIsOversubscribed)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "auto", "--capacity", "1G"}));
    // 600M + 300M fit in 1G: both run at once. (A queues again after its
    // first hold, so that its memory keeps counting until the end.)
    TestClient a(d.socket(), {"--hold-until-stdin", "--mem", "0=600M", "--cycles", "2"});
    ASSERT_TRUE(a.wait_for("grant"));
    TestClient b(d.socket(), {"--hold-until-stdin", "--mem", "0=300M"});
    const auto gb = b.wait_for("grant");
    ASSERT_TRUE(gb);
    EXPECT_FALSE(has_flag(*gb, proto::kGrantExclusive));
    // Another 600M oversubscribes the GPU: it takes turns now, of groups
    // whose memory fits. A and B (900M) keep it; the newcomer waits.
    TestClient c(d.socket(), {"--mem", "0=600M"});
    ASSERT_FALSE(d.wait_client_state(c.pid(), "waiting").is_null());
    EXPECT_EQ(d.status()["gpus"][0]["serializing"], true);
    EXPECT_EQ(d.status()["gpus"][0]["holders"].size(), 2u);
    // A lets go: C (600M) fits beside B (300M) and joins it.
    a.proceed();
    const uint64_t a_released = ns_of(a, "released");
    const auto gc = c.wait_for("grant");
    ASSERT_TRUE(gc);
    EXPECT_GT(gc->ns, a_released);
    EXPECT_FALSE(has_flag(*gc, proto::kGrantExclusive)) << "C shares the GPU with B";
    EXPECT_EQ(c.finish(), 0);
    b.proceed();
    EXPECT_EQ(b.finish(), 0);
    a.close_stdin();
    EXPECT_EQ(a.finish(), 0);
    EXPECT_TRUE(a.events_named("drop").empty()) << "the first holder was asked to let go";
    EXPECT_TRUE(b.events_named("drop").empty()) << "B fits beside A and C";
}

TEST(Scheduling, SeveralGpusAndAMultiGpuClient)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on"}));
    // Different GPUs are independent: A and B hold at once.
    TestClient a(d.socket(), {"--gpu", "0", "--hold-until-stdin"});
    TestClient b(d.socket(), {"--gpu", "1", "--hold-until-stdin"});
    ASSERT_TRUE(a.wait_for("grant"));
    ASSERT_TRUE(b.wait_for("grant"));
    // C wants both (named in the other order: masks are client-local).
    TestClient both(d.socket(), {"--gpu", "1", "--gpu", "0"});
    ASSERT_FALSE(d.wait_client_state(both.pid(), "waiting").is_null());
    // D wants GPU 0 only (its second GPU) and came after C.
    TestClient later(d.socket(), {"--gpu", "5", "--gpu", "0", "--mask", "2"});
    ASSERT_FALSE(d.wait_client_state(later.pid(), "waiting").is_null());

    // GPU 0 is free, but C reserved it: D must not overtake C.
    a.proceed();
    EXPECT_EQ(a.finish(), 0);
    const auto s = d.wait_status(
        [](const nlohmann::json& st) { return Daemon::gpu_by_number(st, 0)["holders"].empty(); });
    EXPECT_EQ(Daemon::client_by_pid(s, later.pid())["state"], "waiting");
    EXPECT_EQ(Daemon::client_by_pid(s, both.pid())["state"], "waiting");

    b.proceed();
    const uint64_t b_released = ns_of(b, "released");
    const auto grant_both = both.wait_for("grant");
    ASSERT_TRUE(grant_both);
    EXPECT_GT(grant_both->ns, b_released);
    EXPECT_NE(grant_both->details.find("mask=0x3"), std::string::npos) << grant_both->details;
    const uint64_t both_released = ns_of(both, "released");
    const auto grant_later = later.wait_for("grant");
    ASSERT_TRUE(grant_later);
    EXPECT_GT(grant_later->ns, both_released);
    EXPECT_NE(grant_later->details.find("mask=0x2"), std::string::npos) << grant_later->details;
    EXPECT_EQ(both.finish(), 0);
    EXPECT_EQ(later.finish(), 0);
    EXPECT_EQ(b.finish(), 0);
    EXPECT_EQ(d.status()["gpus"].size(), 3u);
}

TEST(Scheduling, IdentityComesFromTheSocketNotTheClaim)
{
    Daemon d;
    ASSERT_TRUE(d.start());
    TestClient liar(d.socket(), {"--cycles", "0", "--comm", "systemd"});
    ASSERT_TRUE(liar.wait_for("welcome"));
    auto me = d.wait_client_state(liar.pid(), "idle");
    ASSERT_FALSE(me.is_null());
    EXPECT_EQ(me["pid"], liar.pid());
    EXPECT_EQ(me["uid"], getuid());
    EXPECT_EQ(me["comm"], "systemd");  // shown, but only as what it claims
    // Its command line, as nvshared read it from /proc: the real program.
    const std::string command = me["command"];
    EXPECT_NE(command.find("nvshare-testclient --socket "), std::string::npos) << command;
    EXPECT_NE(command.find(" --comm systemd"), std::string::npos) << command;

    if (getuid() != 0)
        GTEST_SKIP() << "another uid needs root";
    TestClient nobody(d.socket(), {"--cycles", "0", "--comm", "root"}, 65534);
    ASSERT_TRUE(nobody.wait_for("welcome")) << nobody.transcript();
    me = d.wait_client_state(nobody.pid(), "idle");
    ASSERT_FALSE(me.is_null());
    EXPECT_EQ(me["uid"], 65534);
    EXPECT_EQ(me["pid"], nobody.pid());
    nobody.proceed();
    liar.proceed();
    EXPECT_EQ(nobody.finish(), 0);
    EXPECT_EQ(liar.finish(), 0);
}

}  // namespace
}  // namespace nvshare::test
