#include "tests/integration/harness.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "common/lock_client.h"
#include "common/uuid.h"

namespace nvshare::itest {

namespace {

std::string env_or_empty(const char* name)
{
    const char* v = getenv(name);
    return v != nullptr ? v : "";
}

// Milliseconds left until deadline, at least 0, for poll().
int ms_left(std::chrono::steady_clock::time_point deadline)
{
    const auto left = std::chrono::ceil<Millis>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// A short pause between two looks at a condition that has no event to wait on.
void poll_interval()
{
    std::this_thread::sleep_for(2ms);
}

}  // namespace

std::string nvshared_path()
{
    const std::string p = env_or_empty("NVSHARED");
    return p.empty() ? "nvshared" : p;
}

std::string testclient_path()
{
    const std::string p = env_or_empty("NVSHARE_TESTCLIENT");
    return p.empty() ? "nvshare-testclient" : p;
}

std::string socket_activate_path()
{
    return env_or_empty("SYSTEMD_SOCKET_ACTIVATE");
}

// ---- TempDir ----------------------------------------------------------------------

TempDir::TempDir()
{
    char tmpl[] = "/tmp/nvshare-itest.XXXXXX";
    if (mkdtemp(tmpl) == nullptr)
        throw std::runtime_error(std::string("mkdtemp: ") + strerror(errno));
    path_ = tmpl;
    // Clients of other uids must reach sockets in here.
    chmod(path_.c_str(), 0755);
}

TempDir::~TempDir()
{
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

// ---- Process ----------------------------------------------------------------------

Process::Process(const Spec& spec)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (spec.pipe_stdin && pipe2(in, O_CLOEXEC) < 0)
        throw std::runtime_error("pipe");
    if (spec.pipe_stdout && pipe2(out, O_CLOEXEC) < 0)
        throw std::runtime_error("pipe");

    // Everything the child needs is prepared here: the test process has
    // threads, so the child must not allocate between fork and exec.
    static const std::set<std::string> kCleared = {"LISTEN_FDS",     "LISTEN_PID",
                                                   "LISTEN_FDNAMES", "NOTIFY_SOCKET",
                                                   "WATCHDOG_USEC",  "WATCHDOG_PID"};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry(*e);
        const std::string name = entry.substr(0, entry.find('='));
        if (kCleared.count(name) == 0 && spec.env.count(name) == 0)
            env.push_back(entry);
    }
    for (const auto& [name, value] : spec.env)
        env.push_back(name + "=" + value);
    if (spec.listen_fd >= 0)
        env.push_back("LISTEN_FDS=1");
    // Filled in by the child with its own pid.
    char listen_pid[32] = "LISTEN_PID=";
    char watchdog_pid[32] = "WATCHDOG_PID=";
    std::vector<char*> envp;
    for (auto& e : env)
        envp.push_back(e.data());
    if (spec.listen_fd >= 0)
        envp.push_back(listen_pid);
    if (spec.set_watchdog_pid)
        envp.push_back(watchdog_pid);
    envp.push_back(nullptr);
    std::vector<char*> argv;
    for (const auto& a : spec.argv)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error("fork");
    if (pid == 0) {
        if (spec.pipe_stdin)
            dup2(in[0], STDIN_FILENO);
        if (spec.pipe_stdout)
            dup2(out[1], STDOUT_FILENO);
        if (!spec.stderr_path.empty()) {
            const int fd = open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0)
                dup2(fd, STDERR_FILENO);
        }
        if (spec.listen_fd >= 0) {
            // What systemd does for a socket unit: the listener as fd 3.
            if (spec.listen_fd != 3)
                dup2(spec.listen_fd, 3);
            else
                fcntl(3, F_SETFD, 0);
        }
        const int self = getpid();
        snprintf(listen_pid + strlen(listen_pid), 20, "%d", self);
        snprintf(watchdog_pid + strlen(watchdog_pid), 18, "%d", self);
        if (spec.uid &&
            (setgroups(0, nullptr) < 0 || setgid(*spec.uid) < 0 || setuid(*spec.uid) < 0))
            _exit(126);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    pid_ = pid;
    // (glibc 2.36's <sys/pidfd.h> lacks extern "C": call the kernel directly.)
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (spec.pipe_stdin) {
        close(in[0]);
        stdin_ = in[1];
    }
    if (spec.pipe_stdout) {
        close(out[1]);
        stdout_ = out[0];
    }
}

Process::~Process()
{
    reset();
}

Process::Process(Process&& other) noexcept
{
    *this = std::move(other);
}

Process& Process::operator=(Process&& other) noexcept
{
    if (this != &other) {
        reset();
        pid_ = std::exchange(other.pid_, -1);
        pidfd_ = std::exchange(other.pidfd_, -1);
        stdin_ = std::exchange(other.stdin_, -1);
        stdout_ = std::exchange(other.stdout_, -1);
        status_ = std::exchange(other.status_, std::nullopt);
    }
    return *this;
}

void Process::reset()
{
    if (running()) {
        kill(pid_, SIGKILL);
        int st = 0;
        waitpid(pid_, &st, 0);
    }
    for (int* fd : {&pidfd_, &stdin_, &stdout_}) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
    }
    pid_ = -1;
    status_.reset();
}

void Process::close_stdin()
{
    if (stdin_ >= 0)
        close(stdin_);
    stdin_ = -1;
}

bool Process::signal(int sig) const
{
    return running() && kill(pid_, sig) == 0;
}

std::optional<int> Process::wait(Millis timeout)
{
    if (status_ || pid_ <= 0)
        return status_;
    pollfd p{pidfd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0)
        return std::nullopt;
    int st = 0;
    if (waitpid(pid_, &st, 0) == pid_)
        status_ = st;
    return status_;
}

int exit_code(std::optional<int> wait_status)
{
    if (!wait_status)
        return -1000;
    if (WIFEXITED(*wait_status))
        return WEXITSTATUS(*wait_status);
    if (WIFSIGNALED(*wait_status))
        return -WTERMSIG(*wait_status);
    return -999;
}

// ---- NotifySocket -------------------------------------------------------------------

NotifySocket::NotifySocket(std::string path) : path_(std::move(path))
{
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 ||
        pipe2(stop_, O_CLOEXEC) < 0)
        throw std::runtime_error("cannot bind the notify socket " + path_);
    reader_ = std::thread([this] { read_loop(); });
}

NotifySocket::~NotifySocket()
{
    close(stop_[1]);
    reader_.join();
    close(stop_[0]);
    close(fd_);
}

void NotifySocket::read_loop()
{
    for (;;) {
        pollfd p[2] = {{fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return;
        if (p[1].revents != 0)
            return;
        if (p[0].revents == 0)
            continue;
        if (!reading_) {
            // Wait for the stop pipe alone: the datagrams stay queued.
            pollfd stop{stop_[0], POLLIN, 0};
            poll(&stop, 1, -1);
            return;
        }
        char buf[4096];
        const ssize_t n = recv(fd_, buf, sizeof buf, 0);
        if (n <= 0)
            continue;
        // One datagram may carry several newline-separated assignments.
        std::istringstream lines(std::string(buf, static_cast<size_t>(n)));
        std::lock_guard lock(mutex_);
        for (std::string line; std::getline(lines, line);)
            if (!line.empty())
                seen_.push_back(line);
        arrived_.notify_all();
    }
}

std::optional<std::string> NotifySocket::wait_for(const std::string& prefix, Millis timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(mutex_);
    for (;;) {
        for (; consumed_ < seen_.size(); ++consumed_)
            if (seen_[consumed_].rfind(prefix, 0) == 0)
                return seen_[consumed_++];
        if (arrived_.wait_until(lock, deadline) == std::cv_status::timeout &&
            consumed_ == seen_.size())
            return std::nullopt;
    }
}

void NotifySocket::stop_reading()
{
    reading_ = false;
}

std::vector<std::string> NotifySocket::seen() const
{
    std::lock_guard lock(mutex_);
    return seen_;
}

// ---- Daemon -------------------------------------------------------------------------

Daemon::Daemon() : socket_(dir_ / "nvshare.sock"), notify_(dir_ / "notify") {}

Daemon::~Daemon()
{
    if (::testing::Test::HasFailure())
        std::cerr << "---- nvshared's stderr ----\n" << log() << "---------------------------\n";
}

bool Daemon::start(const Config& config)
{
    Process::Spec spec;
    spec.argv = {nvshared_path(), "--socket", socket_};
    spec.argv.insert(spec.argv.end(), config.args.begin(), config.args.end());
    spec.env["NOTIFY_SOCKET"] = notify_.path();
    if (config.watchdog_usec) {
        spec.env["WATCHDOG_USEC"] = std::to_string(*config.watchdog_usec);
        spec.set_watchdog_pid = true;
    }
    spec.stderr_path = dir_ / "nvshared.log";
    spec.listen_fd = config.listen_fd;
    process_ = Process(spec);
    if (!config.wait_ready)
        return true;
    if (!notify_.wait_for("READY=1")) {
        ADD_FAILURE() << "nvshared did not send READY=1";
        return false;
    }
    return true;
}

int Daemon::stop(int sig)
{
    process_.signal(sig);
    return exit_code(process_.wait(kTimeout));
}

std::string Daemon::log() const
{
    std::ifstream in(dir_ / "nvshared.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

nlohmann::json Daemon::status() const
{
    std::string error;
    const std::string text = LockClient::query_status(socket_, &error);
    if (text.empty())
        return nullptr;
    return nlohmann::json::parse(text, nullptr, false);
}

nlohmann::json Daemon::wait_status(const std::function<bool(const nlohmann::json&)>& pred,
                                   Millis timeout) const
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    nlohmann::json last;
    for (;;) {
        last = status();
        if (!last.is_null() && !last.is_discarded() && pred(last))
            return last;
        if (std::chrono::steady_clock::now() >= deadline) {
            ADD_FAILURE() << "status condition not met; last status: " << last.dump();
            return nullptr;
        }
        poll_interval();
    }
}

nlohmann::json Daemon::client_by_pid(const nlohmann::json& status, pid_t pid)
{
    if (status.is_object())
        for (const auto& c : status["clients"])
            if (c["pid"] == pid)
                return c;
    return nullptr;
}

nlohmann::json Daemon::gpu_by_number(const nlohmann::json& status, uint8_t number)
{
    char uuid[kUuidTextSize];
    format_gpu_uuid(test_gpu(number, 0).uuid, uuid);
    if (status.is_object())
        for (const auto& g : status["gpus"])
            if (g["uuid"] == uuid)
                return g;
    return nullptr;
}

nlohmann::json Daemon::wait_client_state(pid_t pid, const std::string& state, Millis timeout) const
{
    const auto s = wait_status(
        [&](const nlohmann::json& st) {
            const auto c = client_by_pid(st, pid);
            return !c.is_null() && c["state"] == state;
        },
        timeout);
    return client_by_pid(s, pid);
}

// ---- TestClient -------------------------------------------------------------------

TestClient::TestClient(const std::string& socket, std::vector<std::string> args,
                       std::optional<uid_t> uid)
{
    Process::Spec spec;
    spec.uid = uid;
    spec.argv = {testclient_path(), "--socket", socket};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.pipe_stdin = true;
    spec.pipe_stdout = true;
    process_ = Process(spec);
}

TestClient::~TestClient()
{
    if (::testing::Test::HasFailure())
        std::cerr << "---- testclient " << pid() << " ----\n" << transcript();
}

bool TestClient::read_some(Millis timeout)
{
    if (eof_)
        return false;
    pollfd p{process_.stdout_fd(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0)
        return false;
    char buf[4096];
    const ssize_t n = read(process_.stdout_fd(), buf, sizeof buf);
    if (n <= 0) {
        eof_ = true;
        return false;
    }
    partial_.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = partial_.find('\n')) != std::string::npos) {
        const std::string line = partial_.substr(0, nl);
        partial_.erase(0, nl + 1);
        Event e;
        std::istringstream in(line);
        in >> e.ns >> e.name;
        std::getline(in >> std::ws, e.details);
        events_.push_back(std::move(e));
    }
    return true;
}

std::optional<Event> TestClient::wait_for(const std::string& name, Millis timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        for (; next_ < events_.size(); ++next_)
            if (events_[next_].name == name)
                return events_[next_++];
        if (!read_some(Millis(ms_left(deadline))))
            if (eof_ || std::chrono::steady_clock::now() >= deadline)
                return std::nullopt;
    }
}

void TestClient::proceed()
{
    if (process_.stdin_fd() >= 0) {
        const ssize_t n = write(process_.stdin_fd(), "\n", 1);
        (void)n;
    }
}

int TestClient::finish(Millis timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_ && ms_left(deadline) > 0)
        read_some(Millis(ms_left(deadline)));
    return exit_code(process_.wait(Millis(ms_left(deadline))));
}

void TestClient::read_any(const std::vector<TestClient*>& clients, Millis timeout)
{
    std::vector<pollfd> fds;
    std::vector<TestClient*> open;
    for (TestClient* c : clients)
        if (!c->eof_) {
            fds.push_back({c->process_.stdout_fd(), POLLIN, 0});
            open.push_back(c);
        }
    if (poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) <= 0)
        return;
    for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents != 0)
            open[i]->read_some(0ms);
}

std::vector<Event> TestClient::events_named(const std::string& name) const
{
    std::vector<Event> out;
    for (const auto& e : events_)
        if (e.name == name)
            out.push_back(e);
    return out;
}

std::string TestClient::transcript() const
{
    std::string s;
    for (const auto& e : events_)
        s += std::to_string(e.ns) + " " + e.name + " " + e.details + "\n";
    return s;
}

// ---- sockets and processes -------------------------------------------------------------

int listen_unix(const std::string& path)
{
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 ||
        listen(fd, SOMAXCONN) < 0)
        throw std::runtime_error("cannot listen on " + path);
    chmod(path.c_str(), 0666);
    return fd;
}

bool send_all(int fd, const void* data, size_t size)
{
    const auto* p = static_cast<const uint8_t*>(data);
    while (size > 0) {
        const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

bool wait_drained(int fd, Millis timeout)
{
    // On a Unix stream socket SIOCOUTQ counts what the peer has not read yet.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int queued = 0;
        if (ioctl(fd, SIOCOUTQ, &queued) < 0)
            return false;
        if (queued == 0)
            return true;
        if (std::chrono::steady_clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(100us);
    }
}

size_t resident_kib(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0)
            return std::stoul(line.substr(6));
    return 0;
}

}  // namespace nvshare::itest
