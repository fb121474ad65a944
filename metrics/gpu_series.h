// Per-GPU gauges from the status document's "gpus": memory, capacity, lock
// holders and queue, whether the GPU's clients take turns, its mode and time
// quantum.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "metrics/gpu_labels.h"

namespace nvshare::metrics {

std::string render_gpu_series(const nlohmann::json& gpus, const GpuLabels& labels);

}  // namespace nvshare::metrics
