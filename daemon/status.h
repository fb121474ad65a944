// The scheduler's state as JSON: the answer to a StatusQuery on the lock
// socket, and the same document nvsharectl prints with --json.
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/scheduler.h"

namespace nvshare::daemon {

nlohmann::json status_json(const Scheduler& scheduler, size_t connections, TimePoint now);

// status_json as text, which never throws (a string that is not UTF-8, though
// none should get this far, is rendered with U+FFFD) and never exceeds
// `max_bytes`: past it, the client list is cut and "clients_omitted" says how
// many entries were left out.
std::string status_text(const Scheduler& scheduler, size_t connections, TimePoint now,
                        size_t max_bytes);

}  // namespace nvshare::daemon
