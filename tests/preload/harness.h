// End-to-end test harness: a real nvshared on a temporary socket, test
// clients run under libnvshare.so against the fake libcuda, and the fake's
// event log read back to see whose GPU work overlapped.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nvshare::test {

// Paths of the built artefacts, from the environment meson sets.
struct Paths {
    std::string nvshared, library, fake_dir, client, client_dl;
    // What LD_PRELOAD names: the library, after the sanitizer runtime in a
    // sanitizer build (it must be loaded first).
    std::string preload;
    static const Paths& get();
};

class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// A child process with stdout and stderr in files.
class Process {
public:
    Process() = default;
    Process(pid_t pid, std::string out, std::string err)
        : pid_(pid), out_(std::move(out)), err_(std::move(err))
    {
    }
    Process(Process&& other) noexcept;
    Process& operator=(Process&& other) noexcept;
    ~Process();

    pid_t pid() const { return pid_; }
    // Exit status, or -1 if it did not end in time (then it is killed), or
    // 128+signal.
    int wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));
    bool running();
    void signal(int sig);
    std::string out() const;
    std::string err() const;

private:
    pid_t pid_ = -1;
    int status_ = -2;
    std::string out_, err_;
};

// env: NAME -> value; a value of "\x01" unsets NAME.
Process spawn(const std::string& program, const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env, const std::string& out,
              const std::string& err);

class Daemon {
public:
    Daemon(const TempDir& dir, std::vector<std::string> args);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    void start();
    void stop(int sig = SIGTERM);  // SIGKILL: a crash, the socket file stays
    const std::string& socket() const { return socket_; }
    nlohmann::json status() const;  // null if unreachable
    std::string log() const;

private:
    const TempDir& dir_;
    std::vector<std::string> args_;
    std::string socket_;
    Process process_;
    int starts_ = 0;
};

// A test client under libnvshare.so and the fake driver.
struct ClientRun {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    bool dl_client = false;  // the build not linked with -lcuda
};
// etc_ld_so_preload non-empty: the client runs in a private mount namespace
// whose /etc/ld.so.preload holds it (a tmpfs copy of /etc; needs root).
Process start_client(const TempDir& dir, const std::string& socket, const ClientRun& run,
                     const std::string& name, const std::string& etc_ld_so_preload = {});

// One piece of GPU work from the fake's log.
struct Work {
    pid_t pid;
    uint64_t start, end;
    std::string name;
};
std::vector<Work> read_work(const std::string& log);
std::vector<Work> work_of(const std::vector<Work>& all, pid_t pid);
// Whether any work of a overlapped in time with any work of b.
bool overlapped(const std::vector<Work>& all, pid_t a, pid_t b);
// Lines of the fake's log that contain `needle`, for process pid.
int count_events(const std::string& log, pid_t pid, const std::string& needle);

// Polls until pred() or the timeout; returns pred().
bool eventually(const std::function<bool()>& pred,
                std::chrono::milliseconds timeout = std::chrono::seconds(20));

bool file_exists(const std::string& path);
void touch(const std::string& path);
std::string read_file(const std::string& path);

// The status entry of the client with this pid, or null.
nlohmann::json client_status(const nlohmann::json& status, pid_t pid);
// A counter of nvshared's status summed over its clients (0 if unreachable).
uint64_t sum_over_clients(const nlohmann::json& status, const char* field);

}  // namespace nvshare::test
