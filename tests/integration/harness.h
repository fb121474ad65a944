// The integration tests' harness: the real nvshared binary on a temporary
// socket, real nvshare-testclient processes, and a NOTIFY_SOCKET of our own to
// see what the daemon tells systemd. Every wait is on a real condition (a
// datagram, a line, a status field, a process exit) with a generous timeout.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace nvshare::itest {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// Long enough for a loaded 2-core CI machine; tests never wait this long
// unless they are failing.
inline constexpr Millis kTimeout = 10s;

// Paths of the programs under test, from the environment meson sets.
std::string nvshared_path();
std::string testclient_path();
std::string socket_activate_path();  // empty if systemd-socket-activate is missing

class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// A child process; killed (SIGKILL) and reaped by the destructor if still running.
class Process {
public:
    struct Spec {
        std::vector<std::string> argv;
        std::map<std::string, std::string> env;  // added to (or replacing) ours
        bool set_watchdog_pid = false;           // WATCHDOG_PID = the child's own pid
        bool pipe_stdin = false;
        bool pipe_stdout = false;
        std::string stderr_path;   // empty: inherit
        int listen_fd = -1;        // passed as fd 3 with LISTEN_FDS=1, LISTEN_PID
        std::optional<uid_t> uid;  // run as this uid (and gid) when we are root
    };
    Process() = default;
    explicit Process(const Spec& spec);
    ~Process();
    Process(Process&& other) noexcept;
    Process& operator=(Process&& other) noexcept;
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const { return pid_; }
    int stdin_fd() const { return stdin_; }
    int stdout_fd() const { return stdout_; }
    void close_stdin();
    bool signal(int sig) const;
    // Waits for the exit; the raw wait status, or nullopt on timeout.
    std::optional<int> wait(Millis timeout);
    bool running() const { return pid_ > 0 && !status_; }

private:
    void reset();
    pid_t pid_ = -1;
    int pidfd_ = -1;
    int stdin_ = -1;
    int stdout_ = -1;
    std::optional<int> status_;
};

// Exit code of a normal exit, or -signal if killed, or -1000 on timeout.
int exit_code(std::optional<int> wait_status);

// The daemon's sd_notify() channel: assignments ("READY=1", "STATUS=...").
// Like systemd, it reads all the time (on a thread of its own): sd_notify()
// blocks the daemon once a few datagrams wait unread.
class NotifySocket {
public:
    explicit NotifySocket(std::string path);
    ~NotifySocket();
    NotifySocket(const NotifySocket&) = delete;
    NotifySocket& operator=(const NotifySocket&) = delete;
    const std::string& path() const { return path_; }
    // The next assignment, after the last one returned, that starts with
    // `prefix`; those passed over on the way stay in seen().
    std::optional<std::string> wait_for(const std::string& prefix, Millis timeout = kTimeout);
    std::vector<std::string> seen() const;
    // From now on nothing is read: the socket's queue fills, as with a
    // manager that is stuck.
    void stop_reading();

private:
    void read_loop();
    std::string path_;
    int fd_ = -1;
    int stop_[2] = {-1, -1};
    mutable std::mutex mutex_;
    std::condition_variable arrived_;
    std::vector<std::string> seen_;
    size_t consumed_ = 0;  // seen_[0..consumed_) were returned or passed over
    std::atomic<bool> reading_{true};
    std::thread reader_;
};

// The real nvshared on a socket in its own temporary directory.
class Daemon {
public:
    struct Config {
        std::vector<std::string> args;  // besides --socket
        std::optional<uint64_t> watchdog_usec = std::nullopt;
        bool wait_ready = true;
        int listen_fd = -1;  // socket-activate with this listener instead of --socket's
    };
    Daemon();
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Starts nvshared --socket PATH ARGS with our NOTIFY_SOCKET; unless told
    // otherwise, waits for READY=1. False (with a gtest failure) on trouble.
    bool start(const Config& config);
    bool start(std::vector<std::string> args = {})
    {
        Config config;
        config.args = std::move(args);
        return start(config);
    }
    // SIGTERM (or sig) and wait: the exit code as exit_code() gives it.
    int stop(int sig = SIGTERM);

    const std::string& socket() const { return socket_; }
    const TempDir& dir() const { return dir_; }
    NotifySocket& notify() { return notify_; }
    Process& process() { return process_; }
    std::string log() const;  // everything the daemon wrote to stderr

    nlohmann::json status() const;  // StatusQuery through the socket; null on failure
    // Polls the status until pred holds; the last status (null on timeout).
    nlohmann::json wait_status(const std::function<bool(const nlohmann::json&)>& pred,
                               Millis timeout = kTimeout) const;
    // The status entry of the client with this pid (null if none).
    static nlohmann::json client_by_pid(const nlohmann::json& status, pid_t pid);
    // The status entry of test GPU `number` (see test_gpu()), null if unknown.
    static nlohmann::json gpu_by_number(const nlohmann::json& status, uint8_t number);
    nlohmann::json wait_client_state(pid_t pid, const std::string& state,
                                     Millis timeout = kTimeout) const;

private:
    TempDir dir_;
    std::string socket_;
    NotifySocket notify_;
    Process process_;
};

// One event line of nvshare-testclient: "<ns> <name> <details>".
struct Event {
    uint64_t ns = 0;
    std::string name;
    std::string details;
};

// An nvshare-testclient process, its stdout parsed into events.
class TestClient {
public:
    TestClient(const std::string& socket, std::vector<std::string> args,
               std::optional<uid_t> uid = std::nullopt);
    ~TestClient();

    pid_t pid() const { return process_.pid(); }
    // Reads events until one named `name` arrives (it is returned), or timeout.
    std::optional<Event> wait_for(const std::string& name, Millis timeout = kTimeout);
    // Tells a --hold-until-stdin / --cycles 0 client to go on.
    void proceed();
    // EOF on its stdin: every later hold ends at once.
    void close_stdin() { process_.close_stdin(); }
    void kill(int sig) { process_.signal(sig); }
    // Reads all events until EOF, then the exit code (see exit_code()).
    int finish(Millis timeout = kTimeout);
    const std::vector<Event>& events() const { return events_; }
    std::vector<Event> events_named(const std::string& name) const;
    std::string transcript() const;  // for failure messages
    bool at_eof() const { return eof_; }
    // Reads what any of `clients` printed, waiting up to `timeout` for the
    // first output: keeps many chatty clients from blocking on a full pipe.
    static void read_any(const std::vector<TestClient*>& clients, Millis timeout);

private:
    bool read_some(Millis timeout);  // false on EOF or timeout
    Process process_;
    std::string partial_;
    std::vector<Event> events_;
    size_t next_ = 0;  // events before this were returned by wait_for
    bool eof_ = false;
};

// A listening Unix stream socket bound at path (a stand-in for systemd's).
int listen_unix(const std::string& path);
// Sends all bytes on a (blocking) socket; false on error.
bool send_all(int fd, const void* data, size_t size);
// Waits until the peer has read everything we sent on a Unix stream socket.
bool wait_drained(int fd, Millis timeout = kTimeout);
// Resident memory of a process in KiB, 0 if unknown.
size_t resident_kib(pid_t pid);

}  // namespace nvshare::itest
