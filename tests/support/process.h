// Child processes of a test: started from a full description, waited for
// with a timeout, and never left behind (the destructor kills and reaps).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/wait.h"

namespace nvshare::test {

class Process {
public:
    struct Spec {
        // argv[0] without a '/' is looked up in PATH.
        std::vector<std::string> argv{};
        // Added to (or replacing) ours; nullopt removes the variable.
        std::map<std::string, std::optional<std::string>> env{};
        bool set_watchdog_pid = false;  // WATCHDOG_PID = the child's own pid
        bool pipe_stdin = false;        // else /dev/null
        bool pipe_stdout = false;
        // Empty: inherited. The same path for both: one shared log.
        std::string stdout_path{};
        std::string stderr_path{};
        bool append_output = false;  // to those files, instead of truncating them
        int listen_fd = -1;          // passed as fd 3 with LISTEN_FDS=1, LISTEN_PID
        std::optional<uid_t> uid{};  // run as this uid (and gid) when we are root
    };
    Process() = default;
    explicit Process(Spec spec);
    ~Process();
    Process(Process&& other) noexcept;
    Process& operator=(Process&& other) noexcept;
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const { return pid_; }
    int stdin_fd() const { return stdin_; }
    int stdout_fd() const { return stdout_; }
    void close_stdin();
    bool signal(int sig);
    bool running();
    // Its exit status (the code, or 128 + signal) once it ends within
    // `timeout`; nullopt while it still runs.
    std::optional<int> exit_within(Millis timeout);
    // Waits up to `timeout`, then kills it: its exit status, or -1 when it
    // had to be killed.
    int wait(Millis timeout = 60s);
    // Sends `sig` and waits: the exit status as wait() gives it.
    int stop(int sig = SIGTERM, Millis timeout = kTimeout);
    // What it wrote to spec.stdout_path / spec.stderr_path.
    std::string out() const;
    std::string err() const;

private:
    void reset();
    pid_t pid_ = -1;
    int pidfd_ = -1;
    int stdin_ = -1;
    int stdout_ = -1;
    std::optional<int> status_;
    std::string stdout_path_, stderr_path_;
};

// A process in the background with stdout and stderr in one log, appended.
class Background : public Process {
public:
    Background(std::vector<std::string> argv, const std::string& log_path);
    std::string log() const { return out(); }
};

struct RunResult {
    int status = -1;  // as Process::wait() gives it
    std::string out;
    std::string err;
};

// Runs argv to completion (killed after `timeout`), capturing its output.
RunResult run(const std::vector<std::string>& argv, Millis timeout = 30s);

// The same command as uid/gid 65534 (nobody), through setpriv.
std::vector<std::string> as_nobody(std::vector<std::string> argv);

// Resident memory of a process in KiB, 0 if unknown.
size_t resident_kib(pid_t pid);

}  // namespace nvshare::test
