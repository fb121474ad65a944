#include "tests/support/daemon.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <stdexcept>

#include "common/lock_client.h"
#include "common/uuid.h"
#include "tests/support/files.h"
#include "tests/support/programs.h"
#include "tests/support/test_gpu.h"

namespace nvshare::test {

Daemon::Daemon()
    : own_dir_(std::make_unique<TempDir>()),
      dir_(own_dir_.get()),
      socket_(*dir_ / "nvshare.sock"),
      notify_(*dir_ / "notify")
{
}

Daemon::Daemon(const TempDir& dir)
    : dir_(&dir), socket_(dir / "nvshare.sock"), notify_(dir / "notify")
{
}

Daemon::Daemon(const TempDir& dir, std::vector<std::string> args) : Daemon(dir)
{
    if (!start(std::move(args)))
        throw std::runtime_error("nvshared did not start: " + log());
}

Daemon::~Daemon()
{
    if (::testing::Test::HasFailure())
        std::cerr << "---- nvshared's log ----\n" << log() << "------------------------\n";
}

bool Daemon::start(const Config& config)
{
    config_ = config;
    Process::Spec spec;
    spec.argv = {nvshared_path(), "--socket", socket_};
    // Its own state (rates.json, state.json), never the host's.
    if (std::find(config.args.begin(), config.args.end(), "--state-dir") == config.args.end())
        spec.argv.insert(spec.argv.end(), {"--state-dir", *dir_ / "state"});
    spec.argv.insert(spec.argv.end(), config.args.begin(), config.args.end());
    spec.env.insert(config.env.begin(), config.env.end());
    spec.env["NOTIFY_SOCKET"] = notify_.path();
    if (config.watchdog_usec) {
        spec.env["WATCHDOG_USEC"] = std::to_string(*config.watchdog_usec);
        spec.set_watchdog_pid = true;
    }
    spec.stdout_path = spec.stderr_path = *dir_ / "nvshared.log";
    spec.append_output = true;
    spec.listen_fd = config.listen_fd;
    process_ = Process(std::move(spec));
    if (!config.wait_ready)
        return true;
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (!notify_.wait_for("READY=1", 20ms)) {
        if (!process_.running()) {
            ADD_FAILURE() << "nvshared exited before READY=1";
            return false;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            ADD_FAILURE() << "nvshared did not send READY=1";
            return false;
        }
    }
    return true;
}

int Daemon::stop(int sig)
{
    return process_.stop(sig);
}

std::string Daemon::log() const
{
    return read_text(*dir_ / "nvshared.log");
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
    nlohmann::json last;
    const bool met = wait_until(
        [&] {
            last = status();
            return !last.is_null() && !last.is_discarded() && pred(last);
        },
        timeout, 2ms);
    if (met)
        return last;
    ADD_FAILURE() << "status condition not met; last status: " << last.dump();
    return nullptr;
}

nlohmann::json Daemon::client_by_pid(const nlohmann::json& status, pid_t pid)
{
    if (status.is_object() && status.contains("clients"))
        for (const auto& c : status["clients"])
            if (c.value("pid", 0) == pid)
                return c;
    return nullptr;
}

nlohmann::json Daemon::gpu_by_number(const nlohmann::json& status, uint8_t number)
{
    char uuid[kUuidTextSize];
    format_gpu_uuid(test_gpu(number, 0).uuid, uuid);
    if (status.is_object() && status.contains("gpus"))
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

}  // namespace nvshare::test
