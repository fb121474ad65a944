#include "tests/support/process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace nvshare::test {

namespace {

// The program's path: argv[0] itself when it names a path, else the first
// executable of that name in PATH (looked up before fork: the test process
// has threads, so the child must not allocate).
std::string resolve(const std::string& program)
{
    if (program.find('/') != std::string::npos)
        return program;
    const char* path = getenv("PATH");
    std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
        if (access(candidate.c_str(), X_OK) == 0)
            return candidate;
    }
    return program;
}

int decode(int raw)
{
    if (WIFEXITED(raw))
        return WEXITSTATUS(raw);
    if (WIFSIGNALED(raw))
        return 128 + WTERMSIG(raw);
    return -1;
}

int open_output(const std::string& path, bool append)
{
    return open(path.c_str(), O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
}

}  // namespace

Process::Process(Spec spec)
    : stdout_path_(std::move(spec.stdout_path)), stderr_path_(std::move(spec.stderr_path))
{
    if (spec.argv.empty())
        throw std::runtime_error("Process: empty argv");
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (spec.pipe_stdin && pipe2(in, O_CLOEXEC) < 0)
        throw std::runtime_error("pipe");
    if (spec.pipe_stdout && pipe2(out, O_CLOEXEC) < 0)
        throw std::runtime_error("pipe");

    // Everything the child needs is prepared here: no allocation after fork.
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
        if (value)
            env.push_back(name + "=" + *value);
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
    const std::string program = resolve(spec.argv[0]);
    std::vector<char*> argv;
    for (const auto& a : spec.argv)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const bool shared_log = !stdout_path_.empty() && stdout_path_ == stderr_path_;

    fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error("fork");
    if (pid == 0) {
        if (spec.pipe_stdin) {
            dup2(in[0], STDIN_FILENO);
        } else {
            const int null = open("/dev/null", O_RDONLY);
            dup2(null, STDIN_FILENO);
        }
        if (spec.pipe_stdout)
            dup2(out[1], STDOUT_FILENO);
        else if (!stdout_path_.empty())
            dup2(open_output(stdout_path_, spec.append_output), STDOUT_FILENO);
        if (shared_log)
            dup2(STDOUT_FILENO, STDERR_FILENO);
        else if (!stderr_path_.empty())
            dup2(open_output(stderr_path_, spec.append_output), STDERR_FILENO);
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
        execve(program.c_str(), argv.data(), envp.data());
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
        stdout_path_ = std::move(other.stdout_path_);
        stderr_path_ = std::move(other.stderr_path_);
    }
    return *this;
}

void Process::reset()
{
    if (running()) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
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

bool Process::signal(int sig)
{
    return running() && kill(pid_, sig) == 0;
}

bool Process::running()
{
    return pid_ > 0 && !exit_within(0ms);
}

std::optional<int> Process::exit_within(Millis timeout)
{
    if (status_ || pid_ <= 0)
        return status_;
    pollfd p{pidfd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0)
        return std::nullopt;
    int raw = 0;
    if (waitpid(pid_, &raw, 0) == pid_)
        status_ = decode(raw);
    return status_;
}

int Process::wait(Millis timeout)
{
    if (pid_ <= 0)
        return -1;
    if (const auto status = exit_within(timeout))
        return *status;
    kill(pid_, SIGKILL);
    exit_within(kTimeout);
    status_ = -1;
    return -1;
}

int Process::stop(int sig, Millis timeout)
{
    signal(sig);
    return wait(timeout);
}

std::string Process::out() const
{
    return read_text(stdout_path_);
}

std::string Process::err() const
{
    return read_text(stderr_path_);
}

Background::Background(std::vector<std::string> argv, const std::string& log_path)
    : Process(Spec{.argv = std::move(argv),
                   .stdout_path = log_path,
                   .stderr_path = log_path,
                   .append_output = true})
{
}

RunResult run(const std::vector<std::string>& argv, Millis timeout)
{
    TempDir dir;
    Process p(Process::Spec{.argv = argv, .stdout_path = dir / "out", .stderr_path = dir / "err"});
    RunResult r;
    r.status = p.wait(timeout);
    r.out = p.out();
    r.err = p.err();
    return r;
}

std::vector<std::string> as_nobody(std::vector<std::string> argv)
{
    argv.insert(argv.begin(),
                {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"});
    return argv;
}

size_t resident_kib(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0)
            return std::stoul(line.substr(6));
    return 0;
}

}  // namespace nvshare::test
