// nvshared's life as systemd sees it: readiness, status, watchdog, socket
// activation, idle exit, clean exit on signals, log format, and who owns the
// socket file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/lock_client.h"
#include "tests/integration/test_client.h"
#include "tests/integration/unix_socket.h"
#include "tests/support/daemon.h"
#include "tests/support/notify_socket.h"
#include "tests/support/process.h"
#include "tests/support/programs.h"
#include "tests/support/temp_dir.h"

namespace nvshare::test {
namespace {

// Whether a Unix socket bound at `path` is listening: /proc/net/unix shows
// __SO_ACCEPTCON (0x10000) in its flags.
bool listening(const std::string& path)
{
    std::ifstream in("/proc/net/unix");
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string num, refs, protocol, flags, type, state, inode, bound;
        if (fields >> num >> refs >> protocol >> flags >> type >> state >> inode >> bound &&
            bound == path && (std::stoul(flags, nullptr, 16) & 0x10000) != 0)
            return true;
    }
    return false;
}

bool exists(const std::string& path)
{
    struct stat st {};
    return lstat(path.c_str(), &st) == 0;
}

// sd_notify() blocks once the manager's queue is full; nvshared's loop must
// not (issue 18): STATUS= goes out at most once a second, without waiting.
TEST(Lifecycle, NotifySocketThatStopsReadingDoesNotStopTheLock)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on"}));
    d.notify().stop_reading();
    // Hundreds of state changes: with a datagram for each, more than the
    // socket's queue (net.unix.max_dgram_qlen, 512 at most) holds.
    for (int round = 0; round < 150; ++round) {
        TestClient c(d.socket(), {"--cycles", "2"});
        ASSERT_EQ(c.finish(), 0) << "round " << round << ": " << c.transcript();
    }
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(d.status().is_object());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    EXPECT_EQ(d.stop(), 0);
}

TEST(Lifecycle, SendsReadyAndOneLineStatus)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--anti-thrashing", "on"}));
    // STATUS= comes with READY=1 and follows the state.
    TestClient holder(d.socket(), {"--hold-until-stdin"});
    ASSERT_TRUE(holder.wait_for("grant"));
    const auto status = d.notify().wait_for("STATUS=1 client(s), 1 holding, 0 waiting");
    ASSERT_TRUE(status) << "seen: " << testing::PrintToString(d.notify().seen());
    EXPECT_NE(status->find("mode on"), std::string::npos) << *status;
    holder.proceed();
    EXPECT_EQ(holder.finish(), 0);
    EXPECT_TRUE(d.notify().wait_for("STATUS=0 client(s)"));
    // Every datagram line is one KEY=VALUE assignment: no multi-line status.
    const std::regex assignment("^[A-Z_]+=.*$");
    for (const auto& a : d.notify().seen())
        EXPECT_TRUE(std::regex_match(a, assignment)) << a;
    EXPECT_EQ(d.stop(), 0);
}

TEST(Lifecycle, PingsTheWatchdogWhenAsked)
{
    Daemon d;
    Daemon::Config config;
    config.watchdog_usec = 200000;  // pings expected about every 100 ms
    ASSERT_TRUE(d.start(config));
    EXPECT_TRUE(d.notify().wait_for("WATCHDOG=1"));
    EXPECT_TRUE(d.notify().wait_for("WATCHDOG=1"));
    EXPECT_TRUE(d.notify().wait_for("WATCHDOG=1"));
    EXPECT_EQ(d.stop(), 0);
}

TEST(Lifecycle, NoWatchdogPingsForAnotherPid)
{
    // WATCHDOG_PID names another process: the watchdog is not ours to ping.
    Daemon d;
    Process::Spec spec;
    spec.argv = {nvshared_path(), "--socket", d.socket()};
    spec.env = {{"NOTIFY_SOCKET", d.notify().path()},
                {"WATCHDOG_USEC", "100000"},
                {"WATCHDOG_PID", std::to_string(getpid())}};
    Process p(spec);
    ASSERT_TRUE(d.notify().wait_for("READY=1"));
    // Several watchdog periods' worth of round trips through the loop.
    for (int i = 0; i < 5; ++i)
        ASSERT_TRUE(d.wait_status([](const auto&) { return true; }).is_object());
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(kTimeout), 0);
    for (const auto& a : d.notify().seen())
        EXPECT_NE(a, "WATCHDOG=1");
}

class ExitSignal : public testing::TestWithParam<int> {};

TEST_P(ExitSignal, ExitsZeroAndRemovesItsSocket)
{
    Daemon d;
    ASSERT_TRUE(d.start());
    ASSERT_TRUE(exists(d.socket()));
    TestClient idle(d.socket(), {"--cycles", "0"});
    ASSERT_TRUE(idle.wait_for("welcome"));
    EXPECT_EQ(d.stop(GetParam()), 0);
    EXPECT_FALSE(exists(d.socket()));
    EXPECT_TRUE(d.notify().wait_for("STOPPING=1"));
    // The client sees the daemon go away and says so.
    EXPECT_EQ(idle.finish(), 1);
    EXPECT_TRUE(idle.wait_for("eof", 0ms));
}

INSTANTIATE_TEST_SUITE_P(Signals, ExitSignal, testing::Values(SIGTERM, SIGINT),
                         [](const auto& param_info) {
                             return param_info.param == SIGTERM ? "SIGTERM" : "SIGINT";
                         });

// An option error is why a service does not start: it must show in
// `journalctl -p err` (issue 18).
TEST(Lifecycle, OptionErrorsAreLoggedAtErrorPriority)
{
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--idle-exit=bogus"}, {"--no-such-option"}, {"--capacity"}}) {
        Daemon d;
        Daemon::Config config;
        config.args = args;
        config.wait_ready = false;
        ASSERT_TRUE(d.start(config));
        EXPECT_EQ(d.process().wait(kTimeout), 2) << args[0];
        const std::string log = d.log();
        EXPECT_EQ(log.rfind("<3>", 0), 0u) << args[0] << ": " << log;
        EXPECT_NE(log.find("see nvshared --help"), std::string::npos) << log;
    }
}

TEST(Lifecycle, LogLinesCarryPriorityPrefixes)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--verbose"}));
    TestClient c(d.socket(), {"--cycles", "2"});
    EXPECT_EQ(c.finish(), 0);
    LockClient bad;
    std::string error;
    ASSERT_TRUE(bad.connect(d.socket(), &error)) << error;
    ASSERT_TRUE(bad.send_raw("garbage-garbage-garbage", 23));
    ASSERT_TRUE(bad.expect(proto::MsgType::Error, kTimeout));
    EXPECT_EQ(d.stop(), 0);

    const std::string log = d.log();
    std::istringstream lines(log);
    const std::regex prefixed("^<[0-7]>.+$");
    std::set<char> levels;
    for (std::string line; std::getline(lines, line);) {
        EXPECT_TRUE(std::regex_match(line, prefixed)) << line;
        if (line.size() > 1)
            levels.insert(line[1]);
    }
    // Info (registration), warning (the garbage) and debug (--verbose) lines.
    EXPECT_TRUE(levels.count('6') && levels.count('4') && levels.count('7')) << log;
}

TEST(Lifecycle, SecondDaemonDoesNotTakeOverALiveSocket)
{
    Daemon first;
    ASSERT_TRUE(first.start());
    TestClient holder(first.socket(), {"--hold-until-stdin"});
    ASSERT_TRUE(holder.wait_for("grant"));

    Process::Spec spec;
    spec.argv = {nvshared_path(), "--socket", first.socket()};
    spec.stderr_path = first.dir() / "second.log";
    Process second(spec);
    EXPECT_EQ(second.wait(kTimeout), 1);

    // The first one still owns the socket and its clients.
    ASSERT_TRUE(exists(first.socket()));
    const auto s = first.wait_client_state(holder.pid(), "holding");
    EXPECT_FALSE(s.is_null());
    TestClient another(first.socket(), {"--cycles", "0"});
    EXPECT_TRUE(another.wait_for("welcome"));
    another.proceed();
    EXPECT_EQ(another.finish(), 0);
    holder.proceed();
    EXPECT_EQ(holder.finish(), 0);
    EXPECT_EQ(first.stop(), 0);
}

TEST(Lifecycle, ReplacesAStaleSocketFile)
{
    Daemon d;
    // A socket file nobody listens on any more, as a crashed daemon leaves it.
    close(listen_unix(d.socket()));
    ASSERT_TRUE(exists(d.socket()));
    ASSERT_TRUE(d.start());
    TestClient c(d.socket(), {"--cycles", "1"});
    EXPECT_EQ(c.finish(), 0);
    EXPECT_EQ(d.stop(), 0);
}

TEST(Lifecycle, RefusesAPathThatIsNotASocket)
{
    Daemon d;
    {
        std::ofstream(d.socket()) << "precious data\n";
    }
    Daemon::Config config;
    config.wait_ready = false;
    ASSERT_TRUE(d.start(config));
    EXPECT_EQ(d.process().wait(kTimeout), 1);
    EXPECT_NE(d.log().find("not a socket"), std::string::npos) << d.log();
    std::ifstream in(d.socket());
    std::string kept;
    std::getline(in, kept);
    EXPECT_EQ(kept, "precious data");
}

TEST(Lifecycle, IdleExitRemovesItsOwnSocket)
{
    Daemon d;
    ASSERT_TRUE(d.start({"--idle-exit", "200ms"}));
    EXPECT_EQ(d.process().wait(kTimeout), 0);
    EXPECT_FALSE(exists(d.socket()));
    EXPECT_TRUE(d.notify().wait_for("STOPPING=1"));
}

TEST(Lifecycle, SocketActivatedIdleExitWaitsForTheLastClient)
{
    // As systemd would: we own the listener; a client queues on it before
    // the daemon starts, so it is there from the daemon's first moment.
    Daemon d;
    const int listener = listen_unix(d.socket());
    TestClient c(d.socket(), {"--cycles", "0"});
    Daemon::Config config;
    config.args = {"--idle-exit", "300ms"};
    config.listen_fd = listener;
    ASSERT_TRUE(d.start(config));
    ASSERT_TRUE(c.wait_for("welcome"));
    // Well past the idle time with a client connected: still running.
    EXPECT_FALSE(d.process().exit_within(1s));
    ASSERT_FALSE(d.status().is_null());
    c.proceed();
    EXPECT_EQ(c.finish(), 0);
    // Now idle: it exits by itself, and leaves systemd's socket in place.
    EXPECT_EQ(d.process().wait(kTimeout), 0);
    EXPECT_TRUE(exists(d.socket()));
    EXPECT_NE(d.log().find("using the socket passed by systemd"), std::string::npos) << d.log();
    close(listener);
}

TEST(Lifecycle, StartedBySystemdSocketActivate)
{
    const std::string activate = socket_activate_path();
    if (activate.empty())
        GTEST_SKIP() << "systemd-socket-activate not found";
    TempDir dir;
    const std::string socket = dir / "nvshare.sock";
    NotifySocket notify(dir / "notify");
    Process::Spec spec;
    spec.argv = {
        activate,           "-l", socket, "-E", "NOTIFY_SOCKET=" + notify.path(), nvshared_path(),
        "--anti-thrashing", "on"};
    spec.stderr_path = dir / "activate.log";
    Process p(spec);
    // systemd-socket-activate binds, listens, then waits for the first
    // connection. The file exists from bind() on: a client that came before
    // listen() is refused (a loaded machine may delay listen()), so wait for it.
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (!listening(socket) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(2ms);
    ASSERT_TRUE(listening(socket));
    chmod(socket.c_str(), 0666);

    // The first client makes it exec nvshared, which must serve that client.
    TestClient first(socket, {"--hold-until-stdin"});
    ASSERT_TRUE(first.wait_for("grant"));
    EXPECT_TRUE(notify.wait_for("READY=1"));
    TestClient second(socket, {"--cycles", "1"});
    ASSERT_TRUE(second.wait_for("request"));
    first.proceed();
    EXPECT_EQ(first.finish(), 0);
    EXPECT_EQ(second.finish(), 0);
    ASSERT_TRUE(second.wait_for("grant", 0ms));
    EXPECT_LT(first.events_named("released").at(0).ns, second.wait_for("released", 0ms)->ns);

    // It execed in place: the same pid is now nvshared.
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(kTimeout), 0);
    // The socket belongs to whoever passed it: left alone.
    EXPECT_TRUE(exists(socket));
    std::ifstream in(dir / "activate.log");
    std::stringstream log;
    log << in.rdbuf();
    EXPECT_NE(log.str().find("using the socket passed by systemd"), std::string::npos) << log.str();
}

}  // namespace
}  // namespace nvshare::test
