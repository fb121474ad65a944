// nvshared's command line.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/log.h"
#include "daemon/scheduler.h"
#include "daemon/settings.h"

namespace nvshare::daemon {

struct Options {
    std::string socket_path;
    // The effective settings: main lays the sources of settings.h over the
    // defaults. `command_line` is what the options themselves set.
    SettingsLayer command_line;
    std::string config_path;    // --config (the admin's defaults)
    bool config_given = false;  // a missing file named by --config is an error
    std::string state_dir;      // --state-dir (changes made at run time)
    bool bus = true;            // false: --no-bus
    SchedulerSettings scheduler;
    std::optional<uint64_t> default_capacity;            // --capacity SIZE
    std::map<std::string, uint64_t> capacities;          // --capacity UUID=SIZE, by UUID
    std::map<std::string, Mode> gpu_modes;               // --anti-thrashing UUID=MODE
    std::map<std::string, Duration> gpu_time_quanta;     // --time-quantum UUID=DURATION
    std::optional<std::chrono::microseconds> idle_exit;  // exit when unused this long
    size_t max_clients = 4096;                           // connections at once, root's not refused
    size_t max_clients_per_user = 64;                    // connections of one non-root uid
    Duration log_waits_after = std::chrono::seconds(1);  // a wait this long is logged
    std::string gpu_info_dir = "/proc/driver/nvidia/gpus";  // where the driver lists GPUs
    LogLevel log_level = LogLevel::Info;
    std::vector<PriorityRule> priority_rules;  // the config file's (start-up only)
};

// The largest --max-clients: with reports bounded by kMaxReportedBytes, the
// daemon's sums of everybody's memory cannot wrap.
inline constexpr size_t kMaxClientsLimit = 1000000;
static_assert(kMaxReportedBytes * 2 <= UINT64_MAX / kMaxClientsLimit);

// Lays `layer` over the effective settings in `options`.
void apply_layer(const SettingsLayer& layer, Options& options);

// The capacity `options` give a GPU: its own, else the default, else its
// physical memory (the rule Scheduler::ensure_gpu applies to new GPUs).
uint64_t configured_capacity(const Options& options, const GpuDescription& gpu);

// The built-in defaults. `state_directory` is $STATE_DIRECTORY (or null),
// which systemd's StateDirectory= sets.
Options default_options(const char* state_directory);

struct ParsedOptions {
    bool run = false;  // false: exit with exit_code (after --help, --version, or an error)
    int exit_code = 0;
    std::string output;  // --help or --version: for stdout
    std::string error;   // why the command line is invalid: for the log, at error priority
    Options options;
};

// The command line laid over `defaults`. Pure (no output, no environment), so
// that the tests call it directly; main prints `output` or logs `error`.
ParsedOptions parse_options(int argc, const char* const* argv, Options defaults);

}  // namespace nvshare::daemon
