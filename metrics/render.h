// nvshared's status document as Prometheus metrics (text format 0.0.4): the
// per-user, per-GPU "usage" part, per-GPU gauges, per-unit client counts
// and the build, every per-GPU series labelled as DCGM exporter labels a GPU
// (metrics/gpu_labels.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "metrics/exposition.h"

namespace nvshare::metrics {

// A user's name for the label (the uid as text when it has none).
using UserName = std::function<std::string(uint32_t uid)>;

// The exposition text; `hostname` is the Hostname label's value. A null
// status (nvshared unreachable) gives only nvshare_up 0; a document without
// the expected fields throws.
std::string render(const nlohmann::json& status, const UserName& user_name,
                   const std::string& hostname);

// The HTTP/1.0 answer to one request (its head, as read): the metrics for
// GET or HEAD of / or /metrics, else an error status.
std::string http_response(const std::string& request_head, const std::string& body);

}  // namespace nvshare::metrics
