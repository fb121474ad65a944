// nvshared's command line.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "daemon/scheduler.h"

namespace nvshare::daemon {

struct Options {
    std::string socket_path;
    SchedulerSettings scheduler;
    std::optional<uint64_t> default_capacity;                  // --capacity SIZE
    std::vector<std::pair<std::string, uint64_t>> capacities;  // --capacity UUID=SIZE
    std::optional<std::chrono::microseconds> idle_exit;        // exit when unused this long
    size_t max_clients = 4096;
    std::string gpu_info_dir = "/proc/driver/nvidia/gpus";  // where the driver lists GPUs
    LogLevel log_level = LogLevel::Info;
};

struct ParsedOptions {
    bool run = false;  // false: exit with exit_code (after --help, --version, or an error)
    int exit_code = 0;
    Options options;
};

ParsedOptions parse_options(int argc, char** argv);

}  // namespace nvshare::daemon
