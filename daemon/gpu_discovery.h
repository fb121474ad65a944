// The host's NVIDIA GPUs as nvshared lists them: the driver's list
// (common/driver_gpus.h), ordered by bus id, so the daemon's GPU indices are
// stable across restarts and match nvidia-smi's default order, with the
// model made printable. Memory sizes are not there: clients report them when
// they register.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/scheduler.h"

namespace nvshare::daemon {

// Parses one `information` file: nullopt if it names no GPU UUID.
std::optional<GpuDescription> parse_gpu_information(std::string_view text);

// Every GPU under `dir` (normally /proc/driver/nvidia/gpus); empty when the
// directory is missing or unreadable (no driver, or hidden by the sandbox).
std::vector<GpuDescription> discover_gpus(const std::string& dir);

}  // namespace nvshare::daemon
