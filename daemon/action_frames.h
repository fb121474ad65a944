// The parts of an action's frame (common/protocol.h) that take more than
// copying a field: from the action and the client records alone. Pure.
#pragma once

#include <cstdint>

#include "common/protocol.h"
#include "daemon/action.h"
#include "daemon/client.h"

namespace nvshare::daemon {

// Which GPU a one-GPU action names, as the client's Hello index (the count
// of its GPUs where it names none of them).
uint32_t local_index(const ClientRecord& client, GpuSet gpu);

// The Waiting frame for `a`, a Waiting action of `client`: its place and
// reason and, where `holder` (the holder a.wait names, if still there),
// who holds the GPU, since when and for how long a quantum, and its name
// cut at a character boundary to fit.
proto::WaitingPayload waiting_payload(const ClientRecord& client, const Action& a,
                                      const ClientRecord* holder, TimePoint now);

}  // namespace nvshare::daemon
