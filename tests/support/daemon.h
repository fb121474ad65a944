// The real nvshared on a socket in a temporary directory.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/notify_socket.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace nvshare::test {

// Its socket (nvshare.sock), notify socket (notify) and log (nvshared.log,
// appended to by every start) are in its directory. While a test fails, the
// destructor prints the log.
class Daemon {
public:
    struct Config {
        std::vector<std::string> args;  // besides --socket
        std::optional<uint64_t> watchdog_usec = std::nullopt;
        bool wait_ready = true;
        int listen_fd = -1;  // socket-activate with this listener instead of --socket's
        std::map<std::string, std::string> env;  // added to its environment
    };
    // In a temporary directory of its own.
    Daemon();
    // In `dir`, which outlives it.
    explicit Daemon(const TempDir& dir);
    // In `dir`, started at once with `args`; throws if it does not get ready.
    Daemon(const TempDir& dir, std::vector<std::string> args);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Starts nvshared --socket PATH ARGS with our NOTIFY_SOCKET; unless told
    // otherwise, waits for READY=1. False (with a gtest failure) when it
    // exits or times out first.
    bool start(const Config& config);
    bool start(std::vector<std::string> args = {})
    {
        Config config;
        config.args = std::move(args);
        return start(config);
    }
    // Starts it again as last time (after stop()).
    bool restart() { return start(config_); }
    // Sends `sig` (SIGKILL: a crash, the socket file stays) and waits: the
    // exit status as Process::wait() gives it.
    int stop(int sig = SIGTERM);
    bool running() { return process_.running(); }
    pid_t pid() const { return process_.pid(); }

    const std::string& socket() const { return socket_; }
    const TempDir& dir() const { return *dir_; }
    NotifySocket& notify() { return notify_; }
    Process& process() { return process_; }
    std::string log() const;  // everything it wrote, over all its starts

    nlohmann::json status() const;  // StatusQuery through the socket; null on failure
    // Polls the status until pred holds; the last status (null on timeout,
    // with a gtest failure).
    nlohmann::json wait_status(const std::function<bool(const nlohmann::json&)>& pred,
                               Millis timeout = kTimeout) const;
    // The status entry of the client with this pid (null if none).
    static nlohmann::json client_by_pid(const nlohmann::json& status, pid_t pid);
    // The status entry of test GPU `number` (see test_gpu()), null if unknown.
    static nlohmann::json gpu_by_number(const nlohmann::json& status, uint8_t number);
    nlohmann::json wait_client_state(pid_t pid, const std::string& state,
                                     Millis timeout = kTimeout) const;

private:
    std::unique_ptr<TempDir> own_dir_;
    const TempDir* dir_;
    std::string socket_;
    NotifySocket notify_;
    Config config_;
    Process process_;
};

}  // namespace nvshare::test
