// lock_bench: how fast nvshared hands one GPU's lock from client to client.
//
// For each client count N it starts the real daemon (mode on, a quantum far
// longer than the run), connects N clients (one thread and one connection
// each) and lets them cycle request -> grant -> release on one GPU. Handoff
// latency is the time from one holder sending Released to the next holder
// receiving its Grant; both are CLOCK_MONOTONIC readings in this process.
// Also reported: cycles per second, the daemon's CPU time per cycle (from
// /proc): over the measured cycles alone, which shows whether its cost per
// event grows with N, and over every cycle, warm-up included; and the
// messages the clients received per measured cycle (the Grant, and the
// Waiting notices of those whose wait changed). `--mixed`: the clients are
// of three users (uids kMixedUid + 0..2, in turn: needs root), so that the
// order between users moves at every hand-over.
//
//   lock_bench PATH/TO/nvshared [--clients 1,2,8,64,512] [--cycles N]
//              [--mixed] [--notify] [--perf-pause]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/lock_client.h"
#include "daemon/accept_gate.h"
#include "tests/support/test_gpu.h"

namespace {

using namespace std::chrono_literals;
using nvshare::LockClient;
using nvshare::proto::MsgType;

int64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The first of the three users of --mixed (no account needed).
constexpr uid_t kMixedUid = 60001;

struct Config {
    std::string daemon;
    std::vector<unsigned> clients{1, 2, 8, 64, 512};
    uint64_t cycles = 20000;
    bool mixed = false;       // clients of three users, not one
    bool notify = false;      // give the daemon a NOTIFY_SOCKET, drained like systemd does
    bool perf_pause = false;  // print the daemon's pid and wait for Enter before measuring
    bool verbose = false;     // the daemon logs every grant (for debugging the benchmark)
};

// The daemon's CPU time so far (user + system), in microseconds: the time
// its threads ran, in nanoseconds (/proc/PID/task/*/schedstat); where the
// kernel does not keep it, /proc/PID/stat's user and system ticks (10 ms).
double cpu_us(pid_t pid)
{
    const std::string proc = "/proc/" + std::to_string(pid);
    std::error_code ec;
    double ran_ns = 0;
    bool any = false;
    for (const auto& task : std::filesystem::directory_iterator(proc + "/task", ec)) {
        std::ifstream in(task.path() / "schedstat");
        unsigned long long ns = 0;
        if (in >> ns) {
            ran_ns += static_cast<double>(ns);
            any = true;
        }
    }
    if (any)
        return ran_ns / 1000.0;
    std::ifstream in(proc + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close_paren = text.rfind(')');
    if (close_paren == std::string::npos)
        return 0;
    std::istringstream fields(text.substr(close_paren + 2));
    std::string skip;
    for (int i = 0; i < 11; ++i)  // fields 3..13
        fields >> skip;
    unsigned long long utime = 0, stime = 0;
    fields >> utime >> stime;
    return static_cast<double>(utime + stime) * 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// nvshared on a socket in a temporary directory, and (with --notify) a
// thread that reads its sd_notify datagrams as systemd would.
class Daemon {
public:
    Daemon(const Config& config)
    {
        char tmpl[] = "/tmp/nvshare-bench.XXXXXX";
        if (mkdtemp(tmpl) == nullptr) {
            perror("mkdtemp");
            exit(1);
        }
        dir_ = tmpl;
        if (config.mixed)
            chmod(dir_.c_str(), 0711);  // other users reach the socket (0666)
        socket_ = dir_ + "/nvshare.sock";
        if (config.notify)
            bind_notify_socket();
        const std::string notify_env = "NOTIFY_SOCKET=" + dir_ + "/notify";
        pid_ = fork();
        if (pid_ == 0) {
            const int log = open(log_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(log, STDERR_FILENO);
            unsetenv("NOTIFY_SOCKET");
            if (config.notify)
                putenv(const_cast<char*>(notify_env.c_str()));
            execl(config.daemon.c_str(), config.daemon.c_str(), "--socket", socket_.c_str(),
                  "--anti-thrashing", "on", "--time-quantum", "1h", "--max-clients", "100000",
                  "--max-clients-per-user", "100000",
                  config.verbose ? "--verbose" : static_cast<char*>(nullptr),
                  static_cast<char*>(nullptr));
            _exit(127);
        }
        if (config.notify)
            start_notify_reader();
        // Ready once it answers a StatusQuery.
        for (int i = 0; i < 1000; ++i) {
            std::string error;
            if (!LockClient::query_status(socket_, &error).empty())
                return;
            std::this_thread::sleep_for(10ms);
        }
        fprintf(stderr, "lock_bench: %s did not come up\n", config.daemon.c_str());
        exit(1);
    }

    ~Daemon()
    {
        kill(pid_, SIGTERM);
        int status = 0;
        waitpid(pid_, &status, 0);
        if (notify_fd_ >= 0) {
            shutdown(notify_fd_, SHUT_RDWR);
            stop_ = true;
            notify_reader_.join();
            close(notify_fd_);
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    const std::string& socket() const { return socket_; }
    pid_t pid() const { return pid_; }
    std::string log_path() const { return dir_ + "/nvshared.log"; }
    // Stops the daemon and shows its log (after a failed run).
    [[noreturn]] void fail()
    {
        kill(pid_, SIGTERM);
        int status = 0;
        waitpid(pid_, &status, 0);
        {
            std::ifstream in(log_path());
            fprintf(stderr, "---- nvshared's log ----\n%s",
                    std::string(std::istreambuf_iterator<char>(in), {}).c_str());
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        _exit(1);  // client threads may still be blocked; do not unwind them
    }

private:
    void bind_notify_socket()
    {
        notify_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        const std::string path = dir_ + "/notify";
        memcpy(addr.sun_path, path.c_str(), path.size() + 1);
        if (bind(notify_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
            perror("bind notify socket");
            exit(1);
        }
    }

    void start_notify_reader()
    {
        notify_reader_ = std::thread([this] {
            char buf[4096];
            while (!stop_) {
                pollfd p{notify_fd_, POLLIN, 0};
                if (poll(&p, 1, 100) > 0 && recv(notify_fd_, buf, sizeof buf, 0) < 0 &&
                    errno != EINTR)
                    return;
            }
        });
    }

    std::string dir_, socket_;
    pid_t pid_ = -1;
    int notify_fd_ = -1;
    std::atomic<bool> stop_{false};
    std::thread notify_reader_;
};

struct Result {
    unsigned clients = 0;
    uint64_t cycles = 0;
    double seconds = 0;
    double median_us = 0, p99_us = 0;
    double daemon_cpu_us_per_cycle = 0;      // the measured cycles
    double daemon_cpu_us_per_any_cycle = 0;  // every cycle, warm-up included
    double messages_per_cycle = 0;
};

double percentile(std::vector<int64_t>& v, double p)
{
    if (v.empty())
        return 0;
    const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
    return static_cast<double>(v[k]) / 1000.0;
}

Result run(const Config& config, unsigned n)
{
    Daemon daemon(config);
    // Handoffs before this many cycles are warm-up: every client has had the
    // lock at least twice by then.
    const uint64_t warmup = std::max<uint64_t>(200, 2 * n);
    const uint64_t total = warmup + config.cycles;

    std::atomic<int64_t> last_release{0};  // written by the holder only
    std::atomic<uint64_t> cycles{0};
    std::atomic<int64_t> measure_start{0}, measure_end{0};
    // The daemon's CPU time when the first and the last measured cycles
    // began: read by the holder, while the daemon waits for its release.
    std::atomic<double> cpu_start{0}, cpu_end{0};
    // Messages the clients received so far, and when those cycles began.
    std::atomic<uint64_t> received{0}, received_start{0}, received_end{0};
    std::atomic<bool> failed{false};
    std::vector<std::vector<int64_t>> handoffs(n);
    // All registered, then all start together.
    std::barrier ready(static_cast<ptrdiff_t>(n) + 1), go(static_cast<ptrdiff_t>(n) + 1);
    std::vector<std::thread> threads;

    for (unsigned i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
            LockClient c;
            std::string error;
            // This thread alone becomes the user (the raw call: glibc's
            // setresuid would change every thread's).
            if (config.mixed && syscall(SYS_setresuid, kMixedUid + i % 3, kMixedUid + i % 3,
                                        kMixedUid + i % 3) != 0) {
                error = std::string("setresuid: ") + strerror(errno);
                failed = true;
            }
            // A user other than root connects at most kConnectionBurst at
            // once, then kConnectionsPerSecond (daemon/accept_gate.h): its
            // later clients wait for their turn, with a tenth to spare.
            if (config.mixed) {
                using nvshare::daemon::kConnectionBurst, nvshare::daemon::kConnectionsPerSecond;
                const double beyond = (i / 3) - 0.9 * kConnectionBurst;
                if (beyond > 0)
                    std::this_thread::sleep_for(
                        std::chrono::duration<double>(beyond / (0.9 * kConnectionsPerSecond)));
            }
            if (failed || !c.connect(daemon.socket(), &error) ||
                !c.hello("bench", {nvshare::test::test_gpu(0, uint64_t{16} << 30)}) ||
                !c.expect(MsgType::Welcome, 30s)) {
                fprintf(stderr, "lock_bench: client %u: cannot register: %s\n", i, error.c_str());
                failed = true;
            }
            auto& mine = handoffs[i];
            mine.reserve(2 * config.cycles / n + 16);
            ready.arrive_and_wait();
            go.arrive_and_wait();
            while (!failed) {
                const int64_t asked = monotonic_ns();
                if (!c.request(1) || !c.expect(MsgType::Grant, 30s, &received)) {
                    fprintf(stderr, "lock_bench: client %u: no grant after %.3f s%s\n", i,
                            static_cast<double>(monotonic_ns() - asked) / 1e9,
                            c.eof() ? " (connection closed)" : "");
                    if (!failed.exchange(true)) {
                        std::string why;
                        fprintf(stderr, "---- status when stuck ----\n%s\n",
                                LockClient::query_status(daemon.socket(), &why).c_str());
                    }
                    failed = true;
                    break;
                }
                const int64_t granted = monotonic_ns();
                const uint64_t k = cycles.fetch_add(1) + 1;
                if (k == warmup) {
                    measure_start = granted;
                    cpu_start = cpu_us(daemon.pid());
                    received_start = received.load();
                }
                if (k > warmup && k <= total)
                    mine.push_back(granted - last_release.load());
                if (k == total) {
                    measure_end = granted;
                    cpu_end = cpu_us(daemon.pid());
                    received_end = received.load();
                }
                const bool last = k >= total;
                last_release = monotonic_ns();
                c.release(1);
                if (last)
                    break;
            }
        });
    }
    ready.arrive_and_wait();
    if (config.perf_pause) {
        fprintf(stderr, "lock_bench: N=%u, daemon pid %d; press Enter to go on\n", n, daemon.pid());
        getchar();
    }
    // Also read around the whole run, warm-up included.
    const double cpu_before = cpu_us(daemon.pid());
    go.arrive_and_wait();
    for (auto& t : threads)
        t.join();
    const double cpu_after = cpu_us(daemon.pid());
    if (failed)
        daemon.fail();

    std::vector<int64_t> all;
    for (auto& h : handoffs)
        all.insert(all.end(), h.begin(), h.end());
    Result r;
    r.clients = n;
    r.cycles = all.size();
    r.seconds = static_cast<double>(measure_end.load() - measure_start.load()) / 1e9;
    r.median_us = percentile(all, 0.5);
    r.p99_us = percentile(all, 0.99);
    r.daemon_cpu_us_per_cycle = (cpu_end.load() - cpu_start.load()) / static_cast<double>(r.cycles);
    r.daemon_cpu_us_per_any_cycle = (cpu_after - cpu_before) / static_cast<double>(cycles.load());
    r.messages_per_cycle = static_cast<double>(received_end.load() - received_start.load()) /
                           static_cast<double>(r.cycles);
    return r;
}

std::vector<unsigned> parse_list(const char* text)
{
    std::vector<unsigned> out;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');)
        out.push_back(static_cast<unsigned>(std::stoul(item)));
    return out;
}

}  // namespace

int main(int argc, char** argv)
{
    Config config;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--clients" && i + 1 < argc)
            config.clients = parse_list(argv[++i]);
        else if (arg == "--cycles" && i + 1 < argc)
            config.cycles = std::stoull(argv[++i]);
        else if (arg == "--mixed")
            config.mixed = true;
        else if (arg == "--notify")
            config.notify = true;
        else if (arg == "--perf-pause")
            config.perf_pause = true;
        else if (arg == "--verbose")
            config.verbose = true;
        else if (config.daemon.empty() && arg[0] != '-')
            config.daemon = arg;
        else {
            fprintf(stderr,
                    "usage: lock_bench PATH/TO/nvshared [--clients 1,2,8,64,512] [--cycles N] "
                    "[--mixed] [--notify] [--perf-pause]\n");
            return 2;
        }
    }
    if (config.daemon.empty()) {
        fprintf(stderr, "lock_bench: give the path of nvshared\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    printf("%8s %8s %10s %12s %10s %18s %18s %11s\n", "clients", "cycles", "cycles/s", "median(us)",
           "p99(us)", "daemon CPU/cycle", "with warm-up", "msgs/cycle");
    for (unsigned n : config.clients) {
        const Result r = run(config, n);
        printf("%8u %8llu %10.0f %12.1f %10.1f %15.2f us %15.2f us %11.1f\n", r.clients,
               static_cast<unsigned long long>(r.cycles), static_cast<double>(r.cycles) / r.seconds,
               r.median_us, r.p99_us, r.daemon_cpu_us_per_cycle, r.daemon_cpu_us_per_any_cycle,
               r.messages_per_cycle);
        fflush(stdout);
    }
    return 0;
}
