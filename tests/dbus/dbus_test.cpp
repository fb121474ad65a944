// The D-Bus control plane end to end: a private system-like bus that loads
// the shipped policy, the real nvshared and nvsharectl, busctl, setpriv for
// unprivileged callers, and lock clients on the real socket.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build-config.h"
#include "common/lock_client.h"
#include "tests/support/files.h"
#include "tests/support/private_bus.h"
#include "tests/support/programs.h"
#include "tests/support/test_gpu.h"

namespace nvshare::test {
namespace {

using proto::MsgType;

constexpr const char* kGpu1Uuid = "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadae01";
constexpr uint64_t kGiB = 1ull << 30;

struct Registered {
    LockClient lock;
    uint64_t id = 0;
};

class DbusTest : public ::testing::Test {
protected:
    TempDir dir;
    std::unique_ptr<PrivateBus> bus = std::make_unique<PrivateBus>();
    std::unique_ptr<Daemon> daemon;

    std::string socket() const { return dir / "nvshare.sock"; }
    std::string config() const { return dir / "nvshare.conf"; }
    std::string state() const { return dir / "state/state.json"; }

    void SetUp() override { write_text(config(), ""); }

    void start_daemon(const std::vector<std::string>& extra = {})
    {
        daemon = start_nvshared(dir, *bus, extra);
        ASSERT_TRUE(daemon->running()) << daemon->log();
        ASSERT_TRUE(bus->has_owner(kName)) << daemon->log();
    }

    void stop_daemon()
    {
        EXPECT_EQ(daemon->stop(), 0) << daemon->log();
        daemon.reset();
    }

    // nvsharectl with this test's lock socket (its fallback without a bus),
    // never the host's: a host where nvshare runs has a daemon on the default.
    RunResult ctl(std::vector<std::string> args) const { return run(ctl_argv(std::move(args))); }
    std::vector<std::string> ctl_argv(std::vector<std::string> args) const
    {
        if (std::find(args.begin(), args.end(), "--socket") == args.end() &&
            std::find(args.begin(), args.end(), "-s") == args.end())
            args.insert(args.begin(), {"--socket", socket()});
        args.insert(args.begin(), nvsharectl_path());
        return args;
    }
    static std::vector<std::string> busctl_argv(std::vector<std::string> args)
    {
        args.insert(args.begin(), {"busctl", "--system"});
        return args;
    }
    static std::string get(const char* path, const char* iface, const char* property)
    {
        const auto r = run(busctl_argv({"get-property", kName, path, iface, property}));
        EXPECT_EQ(r.status, 0) << property << ": " << r.err;
        return r.out.substr(0, r.out.find_last_not_of('\n') + 1);
    }
    static RunResult set(const char* path, const char* iface, const char* property,
                         const char* type, const std::string& value, bool nobody = false)
    {
        auto argv = busctl_argv({"set-property", kName, path, iface, property, type, value});
        return run(nobody ? as_nobody(argv) : argv);
    }

    Registered connect_client(const std::string& comm, uint64_t physical = 16 * kGiB)
    {
        Registered c;
        std::string error;
        EXPECT_TRUE(c.lock.connect(socket(), &error)) << error;
        EXPECT_TRUE(c.lock.hello(comm, {test_gpu(1, physical)}));
        const auto welcome = c.lock.expect(MsgType::Welcome, 5s);
        EXPECT_TRUE(welcome.has_value());
        if (welcome)
            c.id = welcome->as<proto::WelcomeFixed>().client_id;
        return c;
    }

    // Frames that arrive within `window`, none of which may be `type`.
    static bool none_within(LockClient& c, MsgType type, std::chrono::milliseconds window)
    {
        const auto end = std::chrono::steady_clock::now() + window;
        while (std::chrono::steady_clock::now() < end) {
            const auto f = c.receive(std::chrono::duration_cast<std::chrono::milliseconds>(
                end - std::chrono::steady_clock::now()));
            if (f && f->type == type)
                return false;
        }
        return true;
    }
};

TEST_F(DbusTest, BusctlReadsEveryProperty)
{
    write_text(config(), "time-quantum = 2min\nanti-thrashing = on\ngrace = 5s\n");
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    EXPECT_EQ(get(kManager, kManagerIface, "Version"),
              std::string("s \"") + NVSHARE_VERSION + "\"");
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 120000000");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"on\"");
    EXPECT_EQ(get(kManager, kManagerIface, "GraceUSec"), "t 5000000");
    EXPECT_EQ(get(kManager, kManagerIface, "ClientCount"), "u 0");

    auto a = connect_client("alpha");
    ASSERT_TRUE(a.lock.report_memory(0, 3 * kGiB, kGiB));
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    auto b = connect_client("beta");
    ASSERT_TRUE(b.lock.request(1));
    ASSERT_TRUE(wait_until([] { return get(kGpu0, kGpuIface, "Queue") != "at 0"; }));

    EXPECT_EQ(get(kManager, kManagerIface, "ClientCount"), "u 2");
    EXPECT_EQ(get(kGpu0, kGpuIface, "Index"), "u 0");
    EXPECT_EQ(get(kGpu0, kGpuIface, "UUID"), std::string("s \"") + kGpu1Uuid + "\"");
    EXPECT_EQ(get(kGpu0, kGpuIface, "Name"), "s \"Test GPU 1\"");
    EXPECT_EQ(get(kGpu0, kGpuIface, "PhysicalMemory"), "t " + std::to_string(16 * kGiB));
    EXPECT_EQ(get(kGpu0, kGpuIface, "Capacity"), "t " + std::to_string(16 * kGiB));
    EXPECT_EQ(get(kGpu0, kGpuIface, "RequestedMemory"), "t " + std::to_string(4 * kGiB));
    EXPECT_EQ(get(kGpu0, kGpuIface, "Serializing"), "b true");
    EXPECT_EQ(get(kGpu0, kGpuIface, "Holders"), "at 1 " + std::to_string(a.id));
    EXPECT_EQ(get(kGpu0, kGpuIface, "Queue"), "at 1 " + std::to_string(b.id));
    const std::string clients = get(kGpu0, kGpuIface, "Clients");
    const std::string pid = std::to_string(getpid());
    EXPECT_NE(clients.find("a(tiussttt) 2 " + std::to_string(a.id) + " " + pid + " 0 \"alpha\" " +
                           "\"holding\" " + std::to_string(4 * kGiB)),
              std::string::npos)
        << clients;
    EXPECT_NE(clients.find(std::to_string(b.id) + " " + pid + " 0 \"beta\" \"waiting\" 0"),
              std::string::npos)
        << clients;
    const auto list = run(busctl_argv({"call", kName, kManager, kManagerIface, "ListClients"}));
    EXPECT_EQ(list.status, 0) << list.err;
    EXPECT_EQ(list.out.rfind("a(tiussauttt) 2 " + std::to_string(a.id) + " " + pid +
                                 " 0 \"alpha\" \"holding\" 1 0 " + std::to_string(4 * kGiB),
                             0),
              0u)
        << list.out;

    // Reading is open to everybody.
    const auto nobody = run(
        as_nobody(busctl_argv({"get-property", kName, kManager, kManagerIface, "ClientCount"})));
    EXPECT_EQ(nobody.status, 0) << nobody.err;
    EXPECT_EQ(nobody.out, "u 2\n");
}

// Strings that are not UTF-8 (a command cut mid-character by the kernel, a
// GPU name of raw bytes) once made sd-bus refuse a signal, and nvshared left
// the bus for good: now they are replaced where they enter, and the bus stays.
TEST_F(DbusTest, ClientStringsThatAreNotUtf8KeepTheDaemonOnTheBus)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    Registered c;
    std::string error;
    ASSERT_TRUE(c.lock.connect(socket(), &error)) << error;
    GpuSpec gpu = test_gpu(1, 16 * kGiB);
    gpu.name = "GPU \xFF\xC0";
    ASSERT_TRUE(c.lock.hello(std::string("abcdefghijklmn训练").substr(0, 15), {gpu}));
    ASSERT_TRUE(c.lock.expect(MsgType::Welcome, 5s));
    // busctl prints U+FFFD as its UTF-8 bytes in octal.
    EXPECT_EQ(get(kGpu0, kGpuIface, "Name"), "s \"GPU \\357\\277\\275\\357\\277\\275\"");
    const auto list = run(busctl_argv({"call", kName, kManager, kManagerIface, "ListClients"}));
    EXPECT_EQ(list.status, 0) << list.err;
    EXPECT_NE(list.out.find("\"abcdefghijklmn\\357\\277\\275\""), std::string::npos) << list.out;
    // Still on the bus, and settings still change.
    const auto r = set(kManager, kManagerIface, "TimeQuantumUSec", "t", "2000000");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 2000000");
    EXPECT_EQ(daemon->log().find("lost the system bus"), std::string::npos) << daemon->log();
}

TEST_F(DbusTest, NvsharectlShowsEveryProperty)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon({"--anti-thrashing", "on"}));
    auto a = connect_client("alpha");
    ASSERT_TRUE(a.lock.report_memory(0, 2 * kGiB));
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    auto b = connect_client("beta");
    ASSERT_TRUE(b.lock.request(1));
    ASSERT_TRUE(wait_until([] { return get(kGpu0, kGpuIface, "Queue") != "at 0"; }));

    const auto json = ctl({"status", "--json"});
    ASSERT_EQ(json.status, 0) << json.err;
    const auto s = nlohmann::json::parse(json.out);
    EXPECT_EQ(s["version"], NVSHARE_VERSION);
    EXPECT_EQ(s["mode"], "on");
    EXPECT_EQ(s["time_quantum_us"], 30000000);
    EXPECT_EQ(s["grace_us"], 10000000);
    EXPECT_EQ(s["connections"], 2);
    ASSERT_EQ(s["gpus"].size(), 1u);
    const auto& g = s["gpus"][0];
    EXPECT_EQ(g["index"], 0);
    EXPECT_EQ(g["uuid"], kGpu1Uuid);
    EXPECT_EQ(g["name"], "Test GPU 1");
    EXPECT_EQ(g["physical_memory"], 16 * kGiB);
    EXPECT_EQ(g["capacity"], 16 * kGiB);
    EXPECT_EQ(g["requested_memory"], 2 * kGiB);
    EXPECT_EQ(g["serializing"], true);
    EXPECT_EQ(g["holders"], nlohmann::json::array({a.id}));
    EXPECT_EQ(g["queue"], nlohmann::json::array({b.id}));
    ASSERT_EQ(s["clients"].size(), 2u);
    const auto& ca = s["clients"][0];
    const auto& cb = s["clients"][1];
    EXPECT_EQ(ca["comm"], "alpha");
    EXPECT_EQ(ca["user"], "root");
    EXPECT_EQ(ca["pid"], getpid());
    EXPECT_EQ(ca["state"], "holding");
    EXPECT_EQ(ca["gpus"], nlohmann::json::array({0}));
    EXPECT_GT(ca["quantum_left_us"], 0);
    EXPECT_LE(ca["quantum_left_us"], 30000000);
    EXPECT_EQ(cb["state"], "waiting");
    EXPECT_EQ(cb["queue_position"], 1);
    EXPECT_EQ(cb["wait_reason"], "mode on");

    const auto text = ctl({"status"});
    ASSERT_EQ(text.status, 0) << text.err;
    for (const std::string& expected : std::vector<std::string>{
             std::string("anti-thrashing on, time quantum 30s, grace 10s, 2 client(s)"),
             std::string("GPU 0  Test GPU 1  ") + kGpu1Uuid,
             std::string("2.0 GiB requested of 16.0 GiB capacity"),
             std::string("serializing:  yes"), "holder:       " + std::to_string(a.id) + " (alpha)",
             "waiting:      " + std::to_string(b.id) + " (beta)", std::string("ID  PID"),
             std::string("holding  2.0 GiB"), std::string("of quantum left"),
             std::string("#1 in queue, mode on")})
        EXPECT_NE(text.out.find(expected), std::string::npos) << expected << "\n" << text.out;

    // The same for an unprivileged user, and the single-value reader.
    EXPECT_EQ(run(as_nobody(ctl_argv({"status"}))).status, 0);
    const auto mode = ctl({"anti-thrashing"});
    EXPECT_EQ(mode.status, 0);
    EXPECT_EQ(mode.out, "on\n");
}

TEST_F(DbusTest, RootTimeQuantumWriteChangesLockBehaviour)
{
    write_text(config(), "time-quantum = 1h\nanti-thrashing = on\n");
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    auto a = connect_client("alpha");
    auto b = connect_client("beta");
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    ASSERT_TRUE(b.lock.request(1));
    // With a one-hour quantum the holder keeps the lock...
    EXPECT_TRUE(none_within(a.lock, MsgType::Drop, 300ms));
    // ...until root shortens it: the running hold is over at once.
    const auto r = ctl({"set-tq", "100ms"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 100000");
    ASSERT_TRUE(a.lock.expect(MsgType::Drop, 5s));
    // Every client is told the new quantum.
    const auto settings = b.lock.expect(MsgType::Settings, 5s);
    ASSERT_TRUE(settings);
    EXPECT_EQ(settings->as<proto::SettingsFixed>().time_quantum_us, 100000u);
    ASSERT_TRUE(a.lock.release(1));
    EXPECT_TRUE(b.lock.expect(MsgType::Grant, 5s));
}

TEST_F(DbusTest, RootModeWriteChangesLockBehaviour)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon({"--anti-thrashing", "off"}));
    auto a = connect_client("alpha");
    auto b = connect_client("beta");
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    // Off: both run at once.
    ASSERT_TRUE(b.lock.request(1));
    ASSERT_TRUE(b.lock.expect(MsgType::Grant, 5s));
    EXPECT_EQ(get(kGpu0, kGpuIface, "Serializing"), "b false");
    // On (through busctl this time): the later one is asked to let go.
    const auto r = set(kManager, kManagerIface, "AntiThrashing", "s", "on");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(b.lock.expect(MsgType::Drop, 5s));
    EXPECT_EQ(get(kGpu0, kGpuIface, "Serializing"), "b true");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"on\"");
}

TEST_F(DbusTest, RootCapacityWriteChangesLockBehaviour)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon());  // auto
    auto a = connect_client("alpha");
    auto b = connect_client("beta");
    ASSERT_TRUE(a.lock.report_memory(0, 6 * kGiB));
    ASSERT_TRUE(b.lock.report_memory(0, 6 * kGiB));
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    ASSERT_TRUE(b.lock.request(1));
    ASSERT_TRUE(b.lock.expect(MsgType::Grant, 5s));  // 12 GiB fit in 16
    const auto r = ctl({"set-capacity", kGpu1Uuid, "8G"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(get(kGpu0, kGpuIface, "Capacity"), "t " + std::to_string(8 * kGiB));
    EXPECT_TRUE(b.lock.expect(MsgType::Drop, 5s));  // 12 GiB do not fit in 8
    EXPECT_EQ(get(kGpu0, kGpuIface, "Serializing"), "b true");
}

TEST_F(DbusTest, RootRevokesAndNobodyCannot)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon({"--anti-thrashing", "on"}));
    auto a = connect_client("alpha");
    auto b = connect_client("beta");
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    ASSERT_TRUE(b.lock.request(1));

    const auto denied = run(as_nobody(ctl_argv({"revoke", std::to_string(a.id)})));
    EXPECT_EQ(denied.status, 4) << denied.err;
    // No polkitd on this bus: only root may, and the message names the action.
    EXPECT_NE(denied.err.find("org.nvshare.scheduler1.revoke, and polkit is not running"),
              std::string::npos)
        << denied.err;
    EXPECT_EQ(get(kGpu0, kGpuIface, "Holders"), "at 1 " + std::to_string(a.id));

    const auto r = ctl({"revoke", std::to_string(a.id)});
    ASSERT_EQ(r.status, 0) << r.err;
    // The client learns the true cause first (issue 16), then loses the lock.
    const auto cause = a.lock.expect(MsgType::RevokeCause, 5s);
    ASSERT_TRUE(cause);
    EXPECT_EQ(cause->as<proto::RevokeCausePayload>().cause,
              static_cast<uint32_t>(proto::RevokeCauseCode::Admin));
    const auto revoked = a.lock.receive(5s);
    EXPECT_TRUE(revoked && revoked->type == MsgType::Revoked);
    EXPECT_TRUE(b.lock.expect(MsgType::Grant, 5s));
    // By pid: this process runs both clients; only the holder is revoked.
    const auto by_pid = ctl({"revoke", "pid:" + std::to_string(getpid())});
    ASSERT_EQ(by_pid.status, 0) << by_pid.err;
    EXPECT_TRUE(b.lock.expect(MsgType::Revoked, 5s));
    EXPECT_EQ(get(kGpu0, kGpuIface, "Holders"), "at 0");
    // Nobody holds now: revoking again says so.
    EXPECT_EQ(ctl({"revoke", std::to_string(b.id)}).status, 1);
}

TEST_F(DbusTest, UnprivilegedWritesAreRefused)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    auto a = connect_client("alpha");  // so that the GPU object exists
    ASSERT_TRUE(wait_until([] { return get(kManager, kManagerIface, "ClientCount") == "u 1"; }));

    struct Write {
        const char* path;
        const char* iface;
        const char* property;
        const char* type;
        const char* value;
    };
    for (const Write& w : {Write{kManager, kManagerIface, "TimeQuantumUSec", "t", "5000000"},
                           Write{kManager, kManagerIface, "AntiThrashing", "s", "on"},
                           Write{kGpu0, kGpuIface, "Capacity", "t", "1073741824"}}) {
        const auto r = set(w.path, w.iface, w.property, w.type, w.value, /*nobody=*/true);
        EXPECT_NE(r.status, 0) << w.property;
        EXPECT_NE(r.err.find("Access denied"), std::string::npos) << r.err;
    }
    const auto reset =
        run(as_nobody(busctl_argv({"call", kName, kManager, kManagerIface, "ResetSettings"})));
    EXPECT_NE(reset.status, 0);
    // Nothing changed, and nothing was saved.
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 30000000");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"auto\"");
    EXPECT_EQ(get(kGpu0, kGpuIface, "Capacity"), "t " + std::to_string(16 * kGiB));
    EXPECT_EQ(access(state().c_str(), F_OK), -1);

    for (const auto& args : std::vector<std::vector<std::string>>{
             {"set-tq", "5s"}, {"anti-thrashing", "on"}, {"set-capacity", "0", "1G"}, {"reset"}}) {
        const auto r = run(as_nobody(ctl_argv(args)));
        EXPECT_EQ(r.status, 4) << args[0] << ": " << r.err;
        EXPECT_NE(r.err.find("org.nvshare.scheduler1.set-settings, and polkit is not running"),
                  std::string::npos)
            << r.err;
        EXPECT_NE(r.err.find("try sudo"), std::string::npos) << r.err;
    }
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 30000000");
    EXPECT_NE(daemon->log().find("refused uid 65534"), std::string::npos);
}

TEST_F(DbusTest, InvalidValuesAreRefusedAndChangeNothing)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    auto a = connect_client("alpha");
    ASSERT_TRUE(wait_until([] { return get(kManager, kManagerIface, "ClientCount") == "u 1"; }));

    auto tq0 = set(kManager, kManagerIface, "TimeQuantumUSec", "t", "0");
    EXPECT_NE(tq0.status, 0);
    EXPECT_NE(tq0.err.find("valid: 1000 to 86400000000 us"), std::string::npos) << tq0.err;
    EXPECT_NE(set(kManager, kManagerIface, "TimeQuantumUSec", "t", "999").status, 0);
    EXPECT_NE(set(kManager, kManagerIface, "TimeQuantumUSec", "t", "86400000001").status, 0);
    auto mode = set(kManager, kManagerIface, "AntiThrashing", "s", "sometimes");
    EXPECT_NE(mode.status, 0);
    EXPECT_NE(mode.err.find("valid: on, off, auto"), std::string::npos) << mode.err;
    auto cap = set(kGpu0, kGpuIface, "Capacity", "t", "0");
    EXPECT_NE(cap.status, 0);
    EXPECT_NE(cap.err.find("greater than 0"), std::string::npos) << cap.err;
    // More than the GPU's 16 GiB.
    cap = set(kGpu0, kGpuIface, "Capacity", "t", std::to_string(16 * kGiB + 1));
    EXPECT_NE(cap.status, 0);
    EXPECT_NE(cap.err.find("more than GPU 0's memory (valid: 1 byte to 16.0 GiB)"),
              std::string::npos)
        << cap.err;
    // Read-only properties stay read-only.
    EXPECT_NE(set(kManager, kManagerIface, "ClientCount", "u", "7").status, 0);

    for (const auto& args : std::vector<std::vector<std::string>>{{"set-tq", "0"},
                                                                  {"set-tq", "25h"},
                                                                  {"set-tq", "soon"},
                                                                  {"anti-thrashing", "sometimes"},
                                                                  {"set-capacity", "0", "0"},
                                                                  {"set-capacity", "0", "100G"},
                                                                  {"revoke", "someone"}}) {
        const auto r = ctl(args);
        EXPECT_EQ(r.status, 2) << args[0] << " " << args[1] << ": " << r.err;
        EXPECT_NE(r.err.find("valid"), std::string::npos) << r.err;  // says what would be
    }
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 30000000");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"auto\"");
    EXPECT_EQ(get(kGpu0, kGpuIface, "Capacity"), "t " + std::to_string(16 * kGiB));
    EXPECT_EQ(access(state().c_str(), F_OK), -1);
}

TEST_F(DbusTest, PropertiesChangedIsSignalled)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    Background busctl_monitor({"stdbuf", "-oL", "busctl", "--system", "monitor", kName},
                              dir / "busctl-monitor.log");
    ASSERT_TRUE(wait_until(
        [&] { return busctl_monitor.log().find("Monitoring bus") != std::string::npos; }));
    ASSERT_EQ(ctl({"set-tq", "45s"}).status, 0);
    auto a = connect_client("alpha");
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    const std::string id = std::to_string(a.id);
    EXPECT_TRUE(wait_until([&] {
        const std::string log = busctl_monitor.log();
        return log.find("Member=PropertiesChanged") != std::string::npos &&
               log.find("\"TimeQuantumUSec\"") != std::string::npos &&
               log.find("UINT64 45000000") != std::string::npos &&
               log.find("\"Holders\"") != std::string::npos &&
               log.find("Member=InterfacesAdded") != std::string::npos;
    })) << busctl_monitor.log();
}

// nvsharectl monitor: each event in words, naming the process, its user and
// command, with units; --json the same events for programs.
TEST_F(DbusTest, MonitorPrintsEventsInWords)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon());  // auto
    Background monitor(ctl_argv({"monitor"}), dir / "monitor.log");
    Background json_monitor(ctl_argv({"monitor", "--json"}), dir / "monitor.json");
    ASSERT_TRUE(wait_until([&] { return monitor.log().find("Monitoring") != std::string::npos; }))
        << monitor.log();
    // The JSON monitor prints no banner: it is ready once it sees an event,
    // and the first one it is sure to see is a setting that keeps changing
    // (setting the current value again is no event).
    int seconds = 45;
    ASSERT_TRUE(wait_until([&] {
        EXPECT_EQ(ctl({"set-tq", std::to_string(seconds++) + "s"}).status, 0);
        return json_monitor.log().find("setting-changed") != std::string::npos;
    }));
    ASSERT_EQ(ctl({"anti-thrashing", "on"}).status, 0);
    auto a = connect_client("alpha");
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    auto b = connect_client("beta");
    ASSERT_TRUE(b.lock.request(1));
    ASSERT_TRUE(wait_until([] { return get(kGpu0, kGpuIface, "Queue") != "at 0"; }));
    ASSERT_TRUE(a.lock.release(1));
    ASSERT_TRUE(b.lock.expect(MsgType::Grant, 5s));
    ASSERT_EQ(ctl({"revoke", std::to_string(b.id)}).status, 0);
    ASSERT_TRUE(b.lock.expect(MsgType::Revoked, 5s));
    ASSERT_EQ(ctl({"set-capacity", "0", "4G"}).status, 0);

    const std::string pid = std::to_string(getpid());
    const std::string user = "root";
    const std::string gpu = kGpu1Uuid;
    for (const std::string& expected :
         {std::string(" setting-changed time quantum set to 45s"),
          std::string(" setting-changed anti-thrashing set to on"),
          " registered      pid " + pid + " (alpha, " + user + "): registered as client",
          " gpu-added       GPU 0: Test GPU 1 (" + gpu + "), 16.0 GiB",
          " granted         pid " + pid + " (alpha, " + user + "): granted " + gpu +
              ", exclusively",
          " waiting         pid " + pid + " (beta, " + user + "): waits for " + gpu +
              ", held by pid " + pid + " (alpha, uid 0)",
          " released        pid " + pid + " (alpha, " + user + "): released " + gpu,
          " revoked         pid " + pid + " (beta, " + user + "): revoked the lock on " + gpu +
              ": an administrator revoked it",
          " setting-changed capacity of GPU 0 (" + gpu + ") set to 4.0 GiB"})
        EXPECT_TRUE(wait_until([&] { return monitor.log().find(expected) != std::string::npos; }))
            << expected << "\n"
            << monitor.log() << daemon->log();

    // The same revocation for programs: one JSON object per line.
    ASSERT_TRUE(wait_until([&] {
        return json_monitor.log().find("\"capacity of GPU 0") != std::string::npos;
    })) << json_monitor.log();
    bool found = false;
    std::istringstream lines(json_monitor.log());
    for (std::string line; std::getline(lines, line);) {
        const auto j = nlohmann::json::parse(line);  // every line is a document
        if (j["event"] != "revoked")
            continue;
        found = true;
        EXPECT_EQ(j["client"], b.id);
        EXPECT_EQ(j["pid"], getpid());
        EXPECT_EQ(j["uid"], 0);
        EXPECT_EQ(j["user"], user);
        EXPECT_EQ(j["command"], "beta");
        EXPECT_EQ(j["gpus"], nlohmann::json::array({gpu}));
        EXPECT_EQ(j["details"]["cause"], "admin");
        EXPECT_NE(j["time"].get<std::string>().find('T'), std::string::npos);
    }
    EXPECT_TRUE(found) << json_monitor.log();
    // A setting's event carries what changed, as the journal's fields do.
    bool capacity = false;
    std::istringstream again(json_monitor.log());
    for (std::string line; std::getline(again, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j["event"] != "setting-changed" || j["details"]["setting"] != "capacity")
            continue;
        capacity = true;
        EXPECT_EQ(j["details"]["gpu_uuid"], gpu);
        EXPECT_EQ(j["details"]["value"], std::to_string(4 * kGiB));
    }
    EXPECT_TRUE(capacity) << json_monitor.log();

    // Ctrl-C ends the monitor cleanly; and so does the daemon's end, seen.
    EXPECT_EQ(json_monitor.stop(SIGINT), 0);
    daemon.reset();
    EXPECT_TRUE(wait_until([&] {
        return monitor.log().find(" stopped         nvshared stopped") != std::string::npos;
    })) << monitor.log();
    EXPECT_EQ(monitor.stop(SIGINT), 0);
}

// The settings home's order: a value that is already in force changes
// nothing (no signal, no event, no write); one that cannot be saved is
// refused and changes nothing either.
TEST_F(DbusTest, SettingTheCurrentValueChangesNothing)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon());  // auto, 30 s
    Background monitor(ctl_argv({"monitor"}), dir / "monitor.log");
    ASSERT_TRUE(wait_until([&] { return monitor.log().find("Monitoring") != std::string::npos; }));
    ASSERT_EQ(ctl({"set-tq", "30s"}).status, 0);
    ASSERT_EQ(ctl({"anti-thrashing", "auto"}).status, 0);
    EXPECT_EQ(access(state().c_str(), F_OK), -1);  // nothing written
    ASSERT_EQ(ctl({"set-tq", "45s"}).status, 0);
    // Signals from one sender arrive in order: once the change is seen, the
    // no-ops before it would have been too.
    ASSERT_TRUE(wait_until([&] {
        return monitor.log().find("time quantum set to 45s") != std::string::npos;
    })) << monitor.log();
    const std::string log = monitor.log();
    size_t events = 0;
    for (size_t at = log.find("setting-changed"); at != std::string::npos;
         at = log.find("setting-changed", at + 1))
        ++events;
    EXPECT_EQ(events, 1u) << log;
    EXPECT_EQ(access(state().c_str(), F_OK), 0);
}

TEST_F(DbusTest, ASettingThatCannotBeSavedIsRefused)
{
    write_text(dir / "state", "a file where the state directory should be");
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    const auto r = ctl({"set-tq", "45s"});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("cannot save the setting in"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("nothing changed"), std::string::npos) << r.err;
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 30000000");
    const auto busctl = set(kManager, kManagerIface, "AntiThrashing", "s", "on");
    EXPECT_NE(busctl.status, 0);
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"auto\"");
    // Values that are invalid are still told so first.
    const auto bad = ctl({"set-tq", "0"});
    EXPECT_EQ(bad.status, 2) << bad.err;
}

TEST_F(DbusTest, RuntimeChangesSurviveARestart)
{
    write_text(config(), "time-quantum = 20s\n");
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    {
        auto a = connect_client("alpha");
        ASSERT_TRUE(
            wait_until([] { return get(kManager, kManagerIface, "ClientCount") == "u 1"; }));
        ASSERT_EQ(ctl({"set-tq", "45s"}).status, 0);
        ASSERT_EQ(ctl({"anti-thrashing", "off"}).status, 0);
        ASSERT_EQ(ctl({"set-capacity", "0", "8G"}).status, 0);
    }
    ASSERT_NO_FATAL_FAILURE(stop_daemon());
    const auto saved = nlohmann::json::parse(read_text(state()));
    EXPECT_EQ(saved["time_quantum_us"], 45000000);
    EXPECT_EQ(saved["anti_thrashing"], "off");
    EXPECT_EQ(saved["capacities"][kGpu1Uuid], 8 * kGiB);

    // Run-time changes outrank the config file and the command line.
    ASSERT_NO_FATAL_FAILURE(start_daemon({"--time-quantum", "10s"}));
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 45000000");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"off\"");
    auto a = connect_client("alpha");
    ASSERT_TRUE(wait_until([] { return get(kManager, kManagerIface, "ClientCount") == "u 1"; }));
    EXPECT_EQ(get(kGpu0, kGpuIface, "Capacity"), "t " + std::to_string(8 * kGiB));

    // reset forgets them: back to the command line (10s) and the defaults.
    ASSERT_EQ(ctl({"reset"}).status, 0);
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 10000000");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"auto\"");
    EXPECT_EQ(get(kGpu0, kGpuIface, "Capacity"), "t " + std::to_string(16 * kGiB));
    EXPECT_EQ(access(state().c_str(), F_OK), -1);
}

// Whether busctl monitor's `log` holds a message on the first GPU's object
// that mentions `text` (each message starts with "Type=").
bool gpu_signalled(const std::string& log, const std::string& text)
{
    size_t start = log.find("Type=");
    while (start != std::string::npos) {
        const size_t end = log.find("Type=", start + 1);
        const std::string message = log.substr(start, end - start);
        if (message.find(std::string("Path=") + kGpu0 + " ") != std::string::npos &&
            message.find(text) != std::string::npos)
            return true;
        start = end;
    }
    return false;
}

// A GPU's own time quantum and mode: set over the bus and with nvsharectl,
// used for that GPU's holders, shown in the status, kept in the state file
// across a restart, refused when invalid, and forgotten by a reset.
TEST_F(DbusTest, GpuOwnTimeQuantumAndMode)
{
    write_text(config(), "time-quantum = 1h\nanti-thrashing = on\n");
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    Background busctl_monitor({"stdbuf", "-oL", "busctl", "--system", "monitor", kName},
                              dir / "busctl-monitor.log");
    ASSERT_TRUE(wait_until(
        [&] { return busctl_monitor.log().find("Monitoring bus") != std::string::npos; }));
    auto a = connect_client("alpha");
    auto b = connect_client("beta");
    ASSERT_TRUE(wait_until([] { return get(kManager, kManagerIface, "ClientCount") == "u 2"; }));
    EXPECT_EQ(get(kGpu0, kGpuIface, "TimeQuantumUSec"), "t 3600000000");
    EXPECT_EQ(get(kGpu0, kGpuIface, "OwnTimeQuantum"), "b false");
    EXPECT_EQ(get(kGpu0, kGpuIface, "AntiThrashing"), "s \"on\"");
    EXPECT_EQ(get(kGpu0, kGpuIface, "OwnAntiThrashing"), "b false");

    // Checked before any call: a bad value, an unknown GPU.
    EXPECT_EQ(ctl({"set-tq", "--gpu", "0", "0"}).status, 2);
    EXPECT_EQ(ctl({"anti-thrashing", "--gpu", "0", "sometimes"}).status, 2);
    const auto unknown = ctl({"set-tq", "--gpu", "7", "1s"});
    EXPECT_EQ(unknown.status, 5);
    EXPECT_NE(unknown.err.find("no GPU '7' known to nvshared"), std::string::npos) << unknown.err;
    EXPECT_EQ(ctl({"reset", "--gpu", "GPU-nosuch"}).status, 5);
    // Refused by the daemon: out of range, unknown mode, not root.
    EXPECT_NE(set(kGpu0, kGpuIface, "TimeQuantumUSec", "t", "999").status, 0);
    EXPECT_NE(set(kGpu0, kGpuIface, "AntiThrashing", "s", "sometimes").status, 0);
    EXPECT_NE(set(kGpu0, kGpuIface, "TimeQuantumUSec", "t", "100000", /*nobody=*/true).status, 0);
    EXPECT_EQ(get(kGpu0, kGpuIface, "OwnTimeQuantum"), "b false");
    EXPECT_EQ(access(state().c_str(), F_OK), -1);

    // The GPU's own quantum, 100ms, while the host-wide one is an hour: the
    // holder is asked to let go as soon as another waits.
    const auto r = ctl({"set-tq", "--gpu", kGpu1Uuid, "100ms"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(get(kGpu0, kGpuIface, "TimeQuantumUSec"), "t 100000");
    EXPECT_EQ(get(kGpu0, kGpuIface, "OwnTimeQuantum"), "b true");
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 3600000000");
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    ASSERT_TRUE(b.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Drop, 5s));
    ASSERT_TRUE(a.lock.release(1));
    ASSERT_TRUE(b.lock.expect(MsgType::Grant, 5s));

    // The GPU's own mode, through busctl: off, so a runs beside b.
    ASSERT_EQ(set(kGpu0, kGpuIface, "AntiThrashing", "s", "off").status, 0);
    EXPECT_EQ(get(kGpu0, kGpuIface, "AntiThrashing"), "s \"off\"");
    EXPECT_EQ(get(kGpu0, kGpuIface, "OwnAntiThrashing"), "b true");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"on\"");
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    EXPECT_EQ(ctl({"anti-thrashing", "--gpu", "0"}).out, "off\n");

    const auto json = ctl({"status", "--json"});
    ASSERT_EQ(json.status, 0) << json.err;
    const auto g = nlohmann::json::parse(json.out)["gpus"][0];
    EXPECT_EQ(g["mode"], "off");
    EXPECT_EQ(g["own_mode"], true);
    EXPECT_EQ(g["time_quantum_us"], 100000);
    EXPECT_EQ(g["own_time_quantum"], true);
    const auto text = ctl({"status"});
    EXPECT_NE(text.out.find("own settings:  anti-thrashing off, time quantum 100ms"),
              std::string::npos)
        << text.out;

    // Both were signalled on the GPU's object.
    EXPECT_TRUE(wait_until([&] {
        const std::string log = busctl_monitor.log();
        return gpu_signalled(log, "\"OwnTimeQuantum\"") &&
               gpu_signalled(log, "\"OwnAntiThrashing\"");
    })) << busctl_monitor.log();

    // Kept across a restart.
    ASSERT_NO_FATAL_FAILURE(stop_daemon());
    const auto saved = nlohmann::json::parse(read_text(state()));
    EXPECT_EQ(saved["gpu_time_quantum_us"][kGpu1Uuid], 100000);
    EXPECT_EQ(saved["gpu_anti_thrashing"][kGpu1Uuid], "off");
    EXPECT_FALSE(saved.contains("time_quantum_us"));
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    auto c = connect_client("gamma");
    ASSERT_TRUE(wait_until([] { return get(kManager, kManagerIface, "ClientCount") == "u 1"; }));
    EXPECT_EQ(get(kGpu0, kGpuIface, "TimeQuantumUSec"), "t 100000");
    EXPECT_EQ(get(kGpu0, kGpuIface, "AntiThrashing"), "s \"off\"");

    // A GPU that follows the host-wide quantum changes with it, and says so.
    ASSERT_EQ(ctl({"reset", "--gpu", "0"}).status, 0);
    EXPECT_EQ(get(kGpu0, kGpuIface, "TimeQuantumUSec"), "t 3600000000");
    EXPECT_EQ(get(kGpu0, kGpuIface, "OwnTimeQuantum"), "b false");
    EXPECT_EQ(get(kGpu0, kGpuIface, "AntiThrashing"), "s \"on\"");
    EXPECT_EQ(get(kGpu0, kGpuIface, "OwnAntiThrashing"), "b false");
    EXPECT_EQ(nlohmann::json::parse(read_text(state())), nlohmann::json({{"version", 1}}));
    Background monitor2({"stdbuf", "-oL", "busctl", "--system", "monitor", kName},
                        dir / "busctl-monitor2.log");
    ASSERT_TRUE(
        wait_until([&] { return monitor2.log().find("Monitoring bus") != std::string::npos; }));
    ASSERT_EQ(ctl({"set-tq", "2h"}).status, 0);
    EXPECT_EQ(get(kGpu0, kGpuIface, "TimeQuantumUSec"), "t 7200000000");
    EXPECT_TRUE(wait_until([&] {
        // The GPU object's own PropertiesChanged, not only the Manager's.
        return gpu_signalled(monitor2.log(), "\"TimeQuantumUSec\"");
    })) << monitor2.log();
}

TEST_F(DbusTest, CorruptStateFileIsReportedAndReplaced)
{
    ASSERT_EQ(mkdir((dir / "state").c_str(), 0755), 0);
    write_text(state(), "{\"version\": 1, \"time_quantum_us\": \"soon\"");
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 30000000");
    EXPECT_NE(daemon->log().find("is corrupt"), std::string::npos) << daemon->log();
    EXPECT_EQ(read_text(state() + ".corrupt"), "{\"version\": 1, \"time_quantum_us\": \"soon\"");
    ASSERT_EQ(ctl({"set-tq", "2s"}).status, 0);
    EXPECT_EQ(nlohmann::json::parse(read_text(state()))["time_quantum_us"], 2000000);
}

TEST_F(DbusTest, ConfigFileSetsStartValues)
{
    write_text(config(),
               "# admin defaults\n"
               "time-quantum = 2min\n"
               "anti-thrashing = on   # always take turns\n"
               "capacity = 4G\n"
               "colour = blue\n");
    ASSERT_NO_FATAL_FAILURE(start_daemon({"--anti-thrashing", "off"}));
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 120000000");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"off\"");  // option wins
    auto a = connect_client("alpha");
    ASSERT_TRUE(wait_until([] { return get(kManager, kManagerIface, "ClientCount") == "u 1"; }));
    EXPECT_EQ(get(kGpu0, kGpuIface, "Capacity"), "t " + std::to_string(4 * kGiB));
    EXPECT_NE(daemon->log().find("line 5: unknown setting 'colour'"), std::string::npos)
        << daemon->log();
}

// SIGHUP (systemctl reload): the config file is read again, run-time
// changes stay on top of it, and a file that cannot be read changes nothing.
TEST_F(DbusTest, ReloadReadsTheConfigFileAgain)
{
    write_text(config(), "time-quantum = 2min\nanti-thrashing = on\n");
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 120000000");
    write_text(config(), "time-quantum = 3min\nanti-thrashing = off\n");
    kill(daemon->pid(), SIGHUP);
    ASSERT_TRUE(wait_until([] {
        return get(kManager, kManagerIface, "TimeQuantumUSec") == "t 180000000";
    })) << daemon->log();
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"off\"");
    EXPECT_NE(daemon->log().find("reloaded " + config()), std::string::npos) << daemon->log();
    // A run-time change outlives a reload; the file's other settings apply.
    ASSERT_EQ(set(kManager, kManagerIface, "AntiThrashing", "s", "auto").status, 0);
    write_text(config(), "time-quantum = 4min\nanti-thrashing = on\n");
    kill(daemon->pid(), SIGHUP);
    ASSERT_TRUE(wait_until([] {
        return get(kManager, kManagerIface, "TimeQuantumUSec") == "t 240000000";
    })) << daemon->log();
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"auto\"");
    // Unreadable: everything stays, with a warning.
    ASSERT_EQ(unlink(config().c_str()), 0);
    ASSERT_EQ(mkdir(config().c_str(), 0755), 0);  // a directory: cannot be read as a file
    kill(daemon->pid(), SIGHUP);
    ASSERT_TRUE(wait_until([this] {
        return daemon->log().find("cannot be read") != std::string::npos;
    })) << daemon->log();
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 240000000");
    EXPECT_TRUE(daemon->running()) << daemon->log();
}

// nvshare.conf.d/*.conf, in lexical order, over nvshare.conf; others are not
// read.
TEST_F(DbusTest, ConfigDropInsOverrideTheFile)
{
    write_text(config(), "time-quantum = 2min\nanti-thrashing = on\n");
    ASSERT_EQ(mkdir((config() + ".d").c_str(), 0755), 0);
    write_text(config() + ".d/20-later.conf", "time-quantum = 4min\n");
    write_text(config() + ".d/10-early.conf", "time-quantum = 3min\nanti-thrashing = off\n");
    write_text(config() + ".d/30-ignored.conf.bak", "time-quantum = 9min\n");
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    EXPECT_EQ(get(kManager, kManagerIface, "TimeQuantumUSec"), "t 240000000");
    EXPECT_EQ(get(kManager, kManagerIface, "AntiThrashing"), "s \"off\"");
}

TEST_F(DbusTest, NvsharectlErrorsHaveDistinctExitCodes)
{
    // No daemon on the bus.
    auto down = ctl({"status"});
    EXPECT_EQ(down.status, 3);
    EXPECT_NE(down.err.find("nvshared is not running"), std::string::npos) << down.err;
    EXPECT_NE(down.err.find("systemctl start nvshare"), std::string::npos) << down.err;
    EXPECT_EQ(ctl({"set-tq", "1s"}).status, 3);
    EXPECT_EQ(ctl({"monitor"}).status, 3);
    // No bus at all.
    setenv("DBUS_SYSTEM_BUS_ADDRESS", ("unix:path=" + (dir / "no-bus")).c_str(), 1);
    auto no_bus = ctl({"status"});
    setenv("DBUS_SYSTEM_BUS_ADDRESS", bus->address().c_str(), 1);
    EXPECT_EQ(no_bus.status, 3) << no_bus.err;
    EXPECT_NE(no_bus.err.find("systemctl start nvshare"), std::string::npos) << no_bus.err;

    ASSERT_NO_FATAL_FAILURE(start_daemon());
    EXPECT_EQ(ctl({"status"}).status, 0);
    // Running, but no bus to reach it on: the message names the bus.
    setenv("DBUS_SYSTEM_BUS_ADDRESS", ("unix:path=" + (dir / "no-bus")).c_str(), 1);
    auto running_no_bus = ctl({"set-tq", "1s"});
    setenv("DBUS_SYSTEM_BUS_ADDRESS", bus->address().c_str(), 1);
    EXPECT_EQ(running_no_bus.status, 3) << running_no_bus.err;
    EXPECT_NE(running_no_bus.err.find("nvshared runs (it answers on " + socket() +
                                      ") but not on the system bus"),
              std::string::npos)
        << running_no_bus.err;
    EXPECT_EQ(ctl({"set-tq", "0"}).status, 2);                        // invalid value
    EXPECT_EQ(run(as_nobody(ctl_argv({"set-tq", "1s"}))).status, 4);  // access denied
    auto missing = ctl({"revoke", "999"});                            // not found
    EXPECT_EQ(missing.status, 5);
    EXPECT_NE(missing.err.find("no client with id 999"), std::string::npos) << missing.err;
    EXPECT_EQ(ctl({"set-capacity", "7", "1G"}).status, 5);
    EXPECT_EQ(ctl({"revoke", "pid:999999"}).status, 5);
    EXPECT_EQ(ctl({"frobnicate"}).status, 2);  // usage
    EXPECT_EQ(ctl({"set-tq"}).status, 2);
}

// status --json is one document, valid against schema/status.schema.json,
// over D-Bus and, without a bus, from the lock socket; --query gives CSV.
TEST_F(DbusTest, StatusIsOneSchemaOnBothPathsAndCsv)
{
    ASSERT_NO_FATAL_FAILURE(start_daemon({"--anti-thrashing", "auto"}));
    auto a = connect_client("alpha");
    ASSERT_TRUE(a.lock.report_memory(0, 12 * kGiB));
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    auto b = connect_client("beta, the second");
    ASSERT_TRUE(b.lock.report_memory(0, 12 * kGiB));
    ASSERT_TRUE(b.lock.request(1));
    ASSERT_TRUE(wait_until([] { return get(kGpu0, kGpuIface, "Queue") != "at 0"; }));

    const auto validate = [this](const std::string& name, const std::string& text) {
        write_text(dir / name, text);
        const auto v = run({getenv("NVSHARE_TEST_PYTHON"), "-c",
                            "import json,sys,jsonschema\n"
                            "jsonschema.validate(json.load(open(sys.argv[2])), "
                            "json.load(open(sys.argv[1])))",
                            getenv("NVSHARE_TEST_STATUS_SCHEMA"), dir / name});
        EXPECT_EQ(v.status, 0) << name << ": " << v.err;
    };
    const auto over_bus = ctl({"status", "--json"});
    ASSERT_EQ(over_bus.status, 0) << over_bus.err;
    validate("bus.json", over_bus.out);
    const auto bus_doc = nlohmann::json::parse(over_bus.out);
    EXPECT_EQ(bus_doc["clients"][1]["wait_reason"], "oversubscribed");
    EXPECT_EQ(bus_doc["clients"][0]["pinned_memory"], 0);

    const auto csv =
        ctl({"status", "--query=pid,comm,state,queue_position,wait_reason", "--format=csv"});
    ASSERT_EQ(csv.status, 0) << csv.err;
    const std::string pid = std::to_string(getpid());
    EXPECT_EQ(csv.out, "pid,comm,state,queue_position,wait_reason\n" + pid + ",alpha,holding,0,\n" +
                           pid + ",\"beta, the second\",waiting,1,oversubscribed\n");
    const auto bare = ctl({"status", "--query=memory,user", "--format=csv,noheader"});
    EXPECT_EQ(bare.out, "12288,root\n12288,root\n") << bare.err;
    const auto bad = ctl({"status", "--query=pid,colour"});
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.err.find("unknown field 'colour'"), std::string::npos) << bad.err;

    // No system bus: the socket answers, and nvsharectl says where it read.
    setenv("DBUS_SYSTEM_BUS_ADDRESS", ("unix:path=" + (dir / "no-bus")).c_str(), 1);
    const auto over_socket = ctl({"--socket", socket(), "status", "--json"});
    const auto text = ctl({"status", "-s", socket()});
    const auto nothing = ctl({"status", "-s", dir / "no-socket"});
    setenv("DBUS_SYSTEM_BUS_ADDRESS", bus->address().c_str(), 1);
    ASSERT_EQ(over_socket.status, 0) << over_socket.err;
    EXPECT_NE(over_socket.err.find("state read from " + socket()), std::string::npos)
        << over_socket.err;
    EXPECT_EQ(std::count(over_socket.err.begin(), over_socket.err.end(), '\n'), 1)
        << over_socket.err;
    validate("socket.json", over_socket.out);
    const auto socket_doc = nlohmann::json::parse(over_socket.out);
    EXPECT_EQ(socket_doc["clients"][0].size(), bus_doc["clients"][0].size());
    EXPECT_EQ(socket_doc["clients"][1]["user"], "root");
    EXPECT_EQ(text.status, 0) << text.err;
    EXPECT_NE(text.out.find("#1 in queue, oversubscribed"), std::string::npos) << text.out;
    EXPECT_EQ(nothing.status, 3) << nothing.err;
}

TEST_F(DbusTest, HelpConventions)
{
    for (const char* command : {"status", "set-tq", "anti-thrashing", "set-capacity", "revoke",
                                "reset", "monitor", "socket-status", "preload"}) {
        const auto help = ctl({command, "--help"});
        EXPECT_EQ(help.status, 0) << command << ": " << help.err;
        EXPECT_NE(help.out.find(std::string("Usage: nvsharectl ") + command), std::string::npos)
            << help.out;
        const auto same = ctl({"help", command});
        EXPECT_EQ(same.status, 0);
        EXPECT_EQ(same.out, help.out);
    }
    const auto top = ctl({"help"});
    EXPECT_EQ(top.status, 0);
    EXPECT_EQ(top.out, ctl({"--help"}).out);
    EXPECT_EQ(ctl({"help", "frobnicate"}).status, 2);
    // Bare nvsharectl is status.
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    const auto bare = ctl({});
    EXPECT_EQ(bare.status, 0) << bare.err;
    EXPECT_EQ(bare.out, ctl({"status"}).out);
    // Checked before the call, in the user's units.
    const auto unit = ctl({"set-tq", "5x"});
    EXPECT_EQ(unit.status, 2);
    EXPECT_EQ(unit.err, "nvsharectl: invalid duration '5x' (use e.g. 30s, 500ms, 2min)\n");
    const auto range = ctl({"set-tq", "25h"});
    EXPECT_EQ(range.err, "nvsharectl: time quantum '25h' is out of the valid range, 1ms to 24h\n");
}

TEST_F(DbusTest, LockIsServedWithoutAnyBus)
{
    setenv("DBUS_SYSTEM_BUS_ADDRESS", ("unix:path=" + (dir / "no-bus")).c_str(), 1);
    std::vector<std::string> argv = {nvshared_path(), "--socket",         socket(),
                                     "--state-dir",   dir / "state",      "--config",
                                     config(),        "--anti-thrashing", "on"};
    Background lone(argv, dir / "lone.log");
    setenv("DBUS_SYSTEM_BUS_ADDRESS", bus->address().c_str(), 1);
    ASSERT_TRUE(wait_until([&] {
        LockClient probe;
        std::string error;
        return probe.connect(socket(), &error);
    })) << lone.log();
    auto a = connect_client("alpha");
    auto b = connect_client("beta");
    ASSERT_TRUE(a.lock.request(1));
    ASSERT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    ASSERT_TRUE(b.lock.request(1));
    ASSERT_TRUE(a.lock.release(1));
    EXPECT_TRUE(b.lock.expect(MsgType::Grant, 5s));
    const std::string log = lone.log();
    const auto first = log.find("no D-Bus interface");
    EXPECT_NE(first, std::string::npos) << log;
    EXPECT_EQ(log.find("no D-Bus interface", first + 1), std::string::npos) << log;  // once
    EXPECT_FALSE(bus->has_owner(kName));
    EXPECT_EQ(lone.stop(), 0);
}

TEST_F(DbusTest, NoBusOptionAndLostBusKeepTheLock)
{
    {
        ASSERT_NO_FATAL_FAILURE(start_daemon());
        // The bus goes away under a running daemon: it keeps serving the lock.
        bus.reset();
        auto a = connect_client("alpha");
        ASSERT_TRUE(a.lock.request(1));
        EXPECT_TRUE(a.lock.expect(MsgType::Grant, 5s));
        EXPECT_TRUE(wait_until([this] {
            return daemon->log().find("lost the system bus") != std::string::npos;
        })) << daemon->log();
        EXPECT_TRUE(daemon->running());
        stop_daemon();
    }
    bus = std::make_unique<PrivateBus>();
    std::vector<std::string> argv = {nvshared_path(), "--socket", socket(), "--state-dir",
                                     dir / "state",   "--config", config(), "--no-bus"};
    Background quiet(argv, dir / "quiet.log");
    ASSERT_TRUE(wait_until([&] {
        LockClient probe;
        std::string error;
        return probe.connect(socket(), &error);
    }));
    auto a = connect_client("alpha");
    ASSERT_TRUE(a.lock.request(1));
    EXPECT_TRUE(a.lock.expect(MsgType::Grant, 5s));
    EXPECT_FALSE(bus->has_owner(kName));
    EXPECT_EQ(quiet.log().find("D-Bus"), std::string::npos) << quiet.log();
    EXPECT_EQ(quiet.stop(), 0);
}

}  // namespace
}  // namespace nvshare::test
