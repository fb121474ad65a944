// The scheduler's state as JSON: the answer to a StatusQuery on the lock
// socket, and the same document nvsharectl prints with --json.
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/scheduler.h"

namespace nvshare::daemon {

nlohmann::json status_json(const Scheduler& scheduler, size_t connections, TimePoint now);

}  // namespace nvshare::daemon
