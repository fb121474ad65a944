// The scheduler's state as JSON: the answer to a StatusQuery on the lock
// socket, and the same document nvsharectl prints with --json.
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/scheduler.h"

namespace nvshare::daemon {

// A client's time holding and waiting so far, the running hold or wait included.
Duration held_so_far(const Client& client, TimePoint now);
Duration waited_so_far(const Client& client, TimePoint now);
// "idle", "waiting", "holding".
const char* phase_name(Phase phase);

nlohmann::json status_json(const Scheduler& scheduler, size_t connections, TimePoint now);

}  // namespace nvshare::daemon
