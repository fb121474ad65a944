// What nvshared reports about one client, worked out in one place for every
// view of it: the status document (daemon/status.cpp) and the D-Bus client
// lists (daemon/bus_objects.cpp). Each view picks its fields and units.
#pragma once

#include <cstdint>

#include "daemon/scheduler.h"

namespace nvshare::daemon {

struct ClientFacts {
    const char* state = "";         // phase_name(): "idle", "waiting", "holding"
    uint64_t memory = 0;            // reported, all its GPUs, pinned included
    uint64_t pinned = 0;            // the part that is never evicted
    uint64_t confirmed_pinned = 0;  // the part of that others see (MemoryUse)
    uint64_t confirmed = 0;         // the part of `memory` others see (MemoryUse::shared)
    Duration held{};                // so far, the running hold included
    Duration waited{};              // so far, the running wait included
    Duration quantum_left{};        // zero unless it holds
    // Its best place (1 = next) among the GPUs it was told it waits for, and
    // why it waits there, as they are now (Scheduler::wait_facts); 0 and ""
    // unless it waits.
    uint64_t wait_place = 0;
    const char* wait_reason = "";
    SwapStats swaps;  // what nvshare's bulk migration moved for it, all GPUs
};

ClientFacts client_facts(const Scheduler& scheduler, const ClientRecord& client, TimePoint now);

// The memory the client reported on one GPU (0 if none).
uint64_t memory_on(const ClientRecord& client, GpuIndex gpu);

// What remains of a holder's quantum (zero when it holds nothing).
Duration quantum_left(const Scheduler& scheduler, const ClientRecord& client, TimePoint now);
// "idle", "waiting", "holding".
const char* phase_name(Phase phase);

}  // namespace nvshare::daemon
