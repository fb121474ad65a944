// Delivers the scheduler's actions (action.h) to their clients: each as its
// frames on the client's connection (action_frames.h) and as one event in
// the log (journal.h). An action for a client gone in the same batch, or a
// Grant whose hold ended in it, is dropped.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "daemon/connection.h"
#include "daemon/journal.h"
#include "daemon/scheduler.h"

namespace nvshare::daemon {

// The open connections, by serial (a registered one's is its ClientId).
using Connections = std::map<uint64_t, std::unique_ptr<Connection>>;

// Takes the scheduler's pending actions and delivers them.
void dispatch_actions(Scheduler& scheduler, EventLog& events, const Connections& connections);

}  // namespace nvshare::daemon
