// Per-GPU, per-unit gauges from the status document's "clients": the live
// clients of each unit (the last component of their control group: their
// container or systemd unit), and those of them waiting.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "metrics/gpu_labels.h"

namespace nvshare::metrics {

// Units beyond this many on one GPU (those with the fewest clients) are
// added up under kOtherUnits.
inline constexpr size_t kMaxUnitsPerGpu = 50;

// No control group is named so: cgroup names hold no '/'.
inline constexpr const char* kOtherUnits = "/other";

std::string render_unit_series(const nlohmann::json& clients, const GpuLabels& labels);

}  // namespace nvshare::metrics
