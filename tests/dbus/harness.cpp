#include "tests/dbus/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace nvshare::test {

namespace {

std::string env_or_throw(const char* name)
{
    const char* value = getenv(name);
    if (value == nullptr || value[0] == '\0')
        throw std::runtime_error(std::string(name) + " is not set (run through meson test)");
    return value;
}

[[noreturn]] void exec_child(const std::vector<std::string>& argv)
{
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
}

int decode_status(int raw)
{
    if (WIFEXITED(raw))
        return WEXITSTATUS(raw);
    if (WIFSIGNALED(raw))
        return 128 + WTERMSIG(raw);
    return -1;
}

// Waits for `pid` up to `timeout`; kills it (SIGKILL) if it outlives that.
int wait_for(pid_t pid, std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int raw = 0;
    for (;;) {
        const pid_t r = waitpid(pid, &raw, WNOHANG);
        if (r == pid)
            return decode_status(raw);
        if (r < 0)
            return -1;
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &raw, 0);
            return decode_status(raw);
        }
        std::this_thread::sleep_for(5ms);
    }
}

}  // namespace

TempDir::TempDir()
{
    char pattern[] = "/tmp/nvshare-dbus-test.XXXXXX";
    if (mkdtemp(pattern) == nullptr)
        throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
    // The unprivileged runs (setpriv) must reach what is in here.
    chmod(path_.c_str(), 0755);
}

TempDir::~TempDir()
{
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

std::string read_text(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_text(const std::string& path, const std::string& text)
{
    std::ofstream out(path, std::ios::trunc);
    out << text;
}

RunResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout)
{
    TempDir dir;
    const std::string out_path = dir / "out", err_path = dir / "err";
    const pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        dup2(out, 1);
        dup2(err, 2);
        exec_child(argv);
    }
    RunResult r;
    r.status = wait_for(pid, timeout);
    r.out = read_text(out_path);
    r.err = read_text(err_path);
    return r;
}

std::vector<std::string> as_nobody(std::vector<std::string> argv)
{
    argv.insert(argv.begin(),
                {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"});
    return argv;
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (condition())
            return true;
        if (std::chrono::steady_clock::now() > deadline)
            return false;
        std::this_thread::sleep_for(20ms);
    }
}

Background::Background(const std::vector<std::string>& argv, std::string log_path)
    : log_path_(std::move(log_path))
{
    pid_ = fork();
    if (pid_ < 0)
        throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        const int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        dup2(log, 1);
        dup2(log, 2);
        exec_child(argv);
    }
}

Background::~Background()
{
    if (pid_ > 0 && status_ < 0)
        stop(SIGTERM);
}

int Background::stop(int signal)
{
    if (status_ >= 0)
        return status_;
    kill(pid_, signal);
    status_ = wait_for(pid_, 10s);
    return status_;
}

bool Background::running()
{
    if (status_ >= 0)
        return false;
    int raw = 0;
    if (waitpid(pid_, &raw, WNOHANG) == pid_) {
        status_ = decode_status(raw);
        return false;
    }
    return true;
}

PrivateBus::PrivateBus()
{
    int fds[2];
    if (pipe(fds) < 0)
        throw std::runtime_error("pipe failed");
    const std::string config = env_or_throw("NVSHARE_TEST_BUS_CONFIG");
    pid_ = fork();
    if (pid_ < 0)
        throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        close(fds[0]);
        const int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 2);  // "Failed to set fd limit" when not root
        exec_child({"dbus-daemon", "--config-file=" + config, "--nofork",
                    "--print-address=" + std::to_string(fds[1])});
    }
    close(fds[1]);
    // The address is the first line dbus-daemon prints, once it listens.
    std::string line;
    pollfd p{fds[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && poll(&p, 1, 10000) > 0) {
        char buf[512];
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n <= 0)
            break;
        line.append(buf, static_cast<size_t>(n));
    }
    close(fds[0]);
    if (line.find('\n') == std::string::npos) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        throw std::runtime_error("dbus-daemon did not start with " + config);
    }
    address_ = line.substr(0, line.find('\n'));
    setenv("DBUS_SYSTEM_BUS_ADDRESS", address_.c_str(), 1);
}

PrivateBus::~PrivateBus()
{
    unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
    kill(pid_, SIGTERM);
    wait_for(pid_, 10s);
}

bool PrivateBus::has_owner(const std::string& name) const
{
    const auto r =
        run({"busctl", "--system", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
             "org.freedesktop.DBus", "NameHasOwner", "s", name});
    return r.status == 0 && r.out == "b true\n";
}

std::string nvshared_path()
{
    return env_or_throw("NVSHARED");
}
std::string nvsharectl_path()
{
    return env_or_throw("NVSHARECTL");
}

std::unique_ptr<Background> start_nvshared(const TempDir& dir, const PrivateBus& bus,
                                           const std::vector<std::string>& extra)
{
    if (access((dir / "nvshare.conf").c_str(), F_OK) != 0)
        write_text(dir / "nvshare.conf", "");
    std::vector<std::string> argv = {nvshared_path(),     "--socket",    dir / "nvshare.sock",
                                     "--state-dir",       dir / "state", "--config",
                                     dir / "nvshare.conf"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto daemon = std::make_unique<Background>(argv, dir / "nvshared.log");
    wait_until([&] { return bus.has_owner("org.nvshare.Scheduler1") || !daemon->running(); });
    return daemon;
}

}  // namespace nvshare::test
