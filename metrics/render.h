// nvshared's status document as Prometheus metrics (text format 0.0.4):
// the per-user, per-GPU "usage" part, labelled gpu (UUID) and user.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace nvshare::metrics {

// A user's name for the label (the uid as text when it has none).
using UserName = std::function<std::string(uint32_t uid)>;

// The exposition text. A null status (nvshared unreachable) gives only
// nvshare_up 0; a document without the expected fields throws.
std::string render(const nlohmann::json& status, const UserName& user_name);

// A label value with \, " and newline escaped as the format requires.
std::string escape_label(const std::string& value);

// The HTTP/1.0 answer to one request (its head, as read): the metrics for
// GET or HEAD of / or /metrics, else an error status.
std::string http_response(const std::string& request_head, const std::string& body);

}  // namespace nvshare::metrics
