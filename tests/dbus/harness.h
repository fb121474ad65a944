// Real processes for the D-Bus tests: a private system-like dbus-daemon
// (tests/dbus/system.conf, which includes the shipped policy), the built
// nvshared and nvsharectl, busctl and setpriv. Waiting is always on a real
// condition, polled with a generous timeout.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace nvshare::test {

// nvshared's bus name and objects, as dbus/org.nvshare.Scheduler1.xml has them.
inline constexpr const char* kName = "org.nvshare.Scheduler1";
inline constexpr const char* kManager = "/org/nvshare/Scheduler1";
inline constexpr const char* kManagerIface = "org.nvshare.Scheduler1.Manager";
inline constexpr const char* kGpu0 = "/org/nvshare/Scheduler1/gpu/0";
inline constexpr const char* kGpuIface = "org.nvshare.Scheduler1.Gpu";

using namespace std::chrono_literals;

// A fresh directory under /tmp, removed with its contents at destruction.
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

struct RunResult {
    int status = -1;  // exit status, or 128 + signal
    std::string out;
    std::string err;
};

// Runs argv to completion (killed after `timeout`), capturing its output.
RunResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = 30s);

// The same command as uid/gid 65534 (nobody), through setpriv.
std::vector<std::string> as_nobody(std::vector<std::string> argv);

// Polls `condition` every 20 ms until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 10s);

std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);

// A process in the background, output to a log file; SIGTERM at destruction.
class Background {
public:
    Background(const std::vector<std::string>& argv, std::string log_path);
    ~Background();
    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;
    pid_t pid() const { return pid_; }
    std::string log() const { return read_text(log_path_); }
    // Sends `signal` and waits for the exit; returns the exit status.
    int stop(int signal = 15);
    bool running();

private:
    pid_t pid_ = -1;
    std::string log_path_;
    int status_ = -1;
};

// dbus-daemon with tests/dbus/system.conf; sets DBUS_SYSTEM_BUS_ADDRESS for
// this process and its children while it lives.
class PrivateBus {
public:
    PrivateBus();
    ~PrivateBus();
    PrivateBus(const PrivateBus&) = delete;
    PrivateBus& operator=(const PrivateBus&) = delete;
    const std::string& address() const { return address_; }
    bool has_owner(const std::string& name) const;

private:
    pid_t pid_ = -1;
    std::string address_;
};

// Paths of what is under test, from the environment meson sets.
std::string nvshared_path();
std::string nvsharectl_path();

// The built nvshared with its socket, state and config (nvshare.conf,
// created empty when absent) in `dir`, logging to dir/nvshared.log. Returns
// once it owns org.nvshare.Scheduler1 on `bus`, or has exited (check
// running()).
std::unique_ptr<Background> start_nvshared(const TempDir& dir, const PrivateBus& bus,
                                           const std::vector<std::string>& extra = {});

}  // namespace nvshare::test
