// Load and faults together (issue 8): many real nvshare-testclient processes
// cycle the lock of two GPUs against the real nvshared on a private D-Bus
// bus, while the test SIGKILLs holders and waiters and changes the time
// quantum and the anti-thrashing mode through nvsharectl. Afterwards every
// survivor must have finished its cycles, no request may have waited longer
// than the policy allows, and the daemon's descriptors and memory must be
// back where they were before the load.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <set>

#include "tests/integration/test_client.h"
#include "tests/support/daemon.h"
#include "tests/support/private_bus.h"
#include "tests/support/process.h"
#include "tests/support/programs.h"

namespace nvshare::test {
namespace {

constexpr int kClients = 64;
// 1000 in the issue; 200 by default so the test runs in well under a minute
// on a 2-core CI machine next to another test (NVSHARE_STRESS_CYCLES=1000
// for the full run; figures in tests/RELIABILITY.md).
int cycles_per_client()
{
    const char* env = getenv("NVSHARE_STRESS_CYCLES");
    return env != nullptr ? std::max(1, atoi(env)) : 200;
}
constexpr int kHolderKills = 6;
constexpr int kWaiterKills = 6;
// The clients that are killed: extra ones that cycle until they are, so that
// every kill is made however fast or slow the machine runs the others.
constexpr int kVictims = kHolderKills + kWaiterKills;
constexpr int kEndless = 10000000;  // the test client's largest cycle count
constexpr Millis kGrace = 200ms;
const std::vector<std::string> kQuanta = {"20ms", "50ms", "100ms"};
constexpr Millis kLongestQuantum = 100ms;
const std::vector<std::string> kModes = {"on", "auto", "off"};
// Scheduling slack for a loaded machine on top of the policy bound: a
// process that is runnable but not running yet.
constexpr Millis kSlack = 2s;

size_t open_fds(pid_t pid)
{
    size_t n = 0;
    const std::string path = "/proc/" + std::to_string(pid) + "/fd";
    if (DIR* d = opendir(path.c_str())) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.')
                ++n;
        closedir(d);
    }
    return n;
}

std::vector<std::string> client_args(std::mt19937& rng, int cycles)
{
    // Mostly short holds, some longer than the shortest quantum so that
    // drops happen; masks over either GPU or both.
    static const std::vector<std::string> holds = {"0", "0", "0", "1ms", "2ms", "30ms"};
    static const std::vector<std::string> masks = {"1", "2", "3"};
    return {"--gpu",     "0:16G",
            "--gpu",     "1:16G",
            "--mem",     "0=6G",  // three clients oversubscribe: auto serializes
            "--mem",     "1=6G",
            "--mask",    masks[rng() % masks.size()],
            "--hold",    holds[rng() % holds.size()],
            "--cycles",  std::to_string(cycles),
            "--timeout", "60s"};
}

bool all_left(const Daemon& d)
{
    return !d.wait_status([](const nlohmann::json& s) {
                 if (!s["clients"].empty())
                     return false;
                 for (const auto& g : s["gpus"])
                     if (!g["holders"].empty() || !g["queue"].empty())
                         return false;
                 return true;
             }).is_null();
}

TEST(Stress, ManyClientsWithKillsAndSettingChanges)
{
    PrivateBus bus;
    Daemon d;
    {
        std::ofstream(d.dir() / "nvshare.conf") << "";
    }
    ASSERT_TRUE(d.start({"--anti-thrashing", "on", "--time-quantum", "50ms", "--grace",
                         std::to_string(kGrace.count()) + "ms", "--config",
                         d.dir() / "nvshare.conf", "--state-dir", d.dir() / "state"}));
    ASSERT_TRUE(wait_until([&] { return bus.has_owner("org.nvshare.Scheduler1"); }));
    const pid_t daemon_pid = d.process().pid();
    std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());

    // Warm-up with the same kind of load, so that the baseline includes what
    // the allocator keeps once it has served 64 clients.
    {
        std::vector<std::unique_ptr<TestClient>> warm;
        std::vector<TestClient*> raw;
        for (int i = 0; i < kClients + kVictims; ++i) {
            warm.push_back(std::make_unique<TestClient>(d.socket(), client_args(rng, 2)));
            raw.push_back(warm.back().get());
        }
        for (auto& c : warm)
            ASSERT_EQ(c->finish(30s), 0) << c->transcript();
        ASSERT_TRUE(all_left(d));
    }
    const size_t fds_before = open_fds(daemon_pid);
    const size_t rss_before = resident_kib(daemon_pid);

    const int kCycles = cycles_per_client();
    std::vector<std::unique_ptr<TestClient>> clients;
    std::vector<TestClient*> raw;
    std::set<pid_t> victims;
    for (int i = 0; i < kClients + kVictims; ++i) {
        const bool victim = i >= kClients;
        clients.push_back(std::make_unique<TestClient>(
            d.socket(), client_args(rng, victim ? kEndless : kCycles)));
        raw.push_back(clients.back().get());
        if (victim)
            victims.insert(clients.back()->pid());
    }

    std::set<pid_t> killed;
    int holder_kills = 0, waiter_kills = 0, setting_changes = 0;
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + 120s;
    auto next_kill = start + 300ms;
    auto next_change = start + 200ms;
    while (std::any_of(raw.begin(), raw.end(), [](TestClient* c) { return !c->at_eof(); }) &&
           std::chrono::steady_clock::now() < deadline) {
        TestClient::read_any(raw, 20ms);
        const auto now = std::chrono::steady_clock::now();
        if (now >= next_kill && (holder_kills < kHolderKills || waiter_kills < kWaiterKills)) {
            next_kill = now + 50ms;
            const auto s = d.status();
            std::vector<pid_t> holding, waiting;
            for (const auto& c : s["clients"]) {
                const pid_t pid = c["pid"];
                if (victims.count(pid) == 0 || killed.count(pid) != 0)
                    continue;
                if (c["state"] == "holding")
                    holding.push_back(pid);
                else if (c["state"] == "waiting")
                    waiting.push_back(pid);
            }
            auto kill_one = [&](const std::vector<pid_t>& from, int& count, int limit) {
                if (from.empty() || count >= limit)
                    return;
                const pid_t pid = from[rng() % from.size()];
                for (auto& c : clients)
                    if (c->pid() == pid) {
                        c->kill(SIGKILL);
                        killed.insert(pid);
                        ++count;
                    }
            };
            kill_one(holding, holder_kills, kHolderKills);
            kill_one(waiting, waiter_kills, kWaiterKills);
            // Nobody waits while the mode is `off`: the next look may find
            // some. The victims cycle until killed, so the run lasts until
            // every kill is made (or the deadline says the daemon stalled).
        }
        if (now >= next_change) {
            next_change = now + 250ms;
            const bool tq = (setting_changes % 2) == 0;
            std::vector<std::string> argv = {nvsharectl_path()};
            if (tq)
                argv.insert(argv.end(), {"set-tq", kQuanta[rng() % kQuanta.size()]});
            else
                argv.insert(argv.end(), {"anti-thrashing", kModes[rng() % kModes.size()]});
            const auto r = run(argv);
            ASSERT_EQ(r.status, 0) << r.err;
            ++setting_changes;
        }
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;

    // Any request waits at most for each other client once, for a quantum
    // plus the grace to let go (FCFS; a dead holder frees the lock at once).
    const auto bound = (kClients + kVictims - 1) * (kLongestQuantum + kGrace) + kSlack;
    uint64_t longest_wait_ns = 0, cycles_done = 0;
    int survivors = 0;
    for (auto& c : clients) {
        const int code = c->finish(10s);
        if (killed.count(c->pid()) != 0) {
            EXPECT_EQ(code, 128 + SIGKILL);
            continue;
        }
        ++survivors;
        // 4: done, but revoked at least once (a slow holder past its grace).
        EXPECT_TRUE(code == 0 || code == 4) << "exit " << code << "\n" << c->transcript();
        const auto requests = c->events_named("request");
        const auto grants = c->events_named("grant");
        ASSERT_EQ(grants.size(), static_cast<size_t>(kCycles)) << "pid " << c->pid();
        ASSERT_EQ(requests.size(), grants.size());
        for (size_t i = 0; i < grants.size(); ++i) {
            const uint64_t waited = grants[i].ns - requests[i].ns;
            longest_wait_ns = std::max(longest_wait_ns, waited);
            EXPECT_LE(waited, uint64_t(std::chrono::nanoseconds(bound).count()))
                << "pid " << c->pid() << " cycle " << i;
        }
        cycles_done += grants.size();
    }
    ASSERT_TRUE(all_left(d));

    // The connection of the last status query may still be open when either
    // count is taken (the daemon sees its EOF a moment later): wait for the
    // count to come down to the baseline rather than sampling once.
    EXPECT_TRUE(wait_until([&] { return open_fds(daemon_pid) <= fds_before; }))
        << open_fds(daemon_pid) << " descriptors open, " << fds_before << " before";
    const size_t fds_after = open_fds(daemon_pid);
    const size_t rss_after = resident_kib(daemon_pid);
    EXPECT_GE(fds_after + 1, fds_before);  // at most that one query fewer
#ifdef __SANITIZE_ADDRESS__
    // ASan's quarantine and shadow memory grow RSS by design. Here
    // LeakSanitizer checks the daemon instead, at its exit (d.stop() below).
    std::cout << "stress: RSS not compared in an AddressSanitizer build\n";
#else
    // Margin: what glibc's allocator may keep in its arenas after a different
    // mix of allocations, which depends on how many clients a loaded machine
    // leaves connected at once (a few MiB). A leak per
    // client or per cycle is larger (64 clients x 200 cycles), and the
    // sanitizer pass's LeakSanitizer checks the daemon byte for byte.
    EXPECT_LE(rss_after, rss_before + 4096) << "resident KiB before " << rss_before;
#endif

    std::cout << "stress: " << kClients << " clients (and " << kVictims << " to kill) x " << kCycles
              << " cycles, " << holder_kills << " holders and " << waiter_kills
              << " waiters killed, " << survivors << " survivors, " << cycles_done
              << " cycles done, " << setting_changes << " setting changes, longest wait "
              << longest_wait_ns / 1000000 << " ms (bound "
              << std::chrono::duration_cast<Millis>(bound).count() << " ms), fds " << fds_before
              << " -> " << fds_after << ", RSS " << rss_before << " -> " << rss_after << " KiB, "
              << std::chrono::duration_cast<Millis>(elapsed).count() << " ms\n";
    EXPECT_EQ(holder_kills, kHolderKills);
    EXPECT_EQ(waiter_kills, kWaiterKills);
    EXPECT_EQ(d.stop(), 0);
}

}  // namespace
}  // namespace nvshare::test
