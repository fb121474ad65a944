// A GPU as nvshared knows it: what the host or its clients said of it, its
// capacity and who holds it now. The Scheduler owns these; the status
// document, the bus objects and the room read them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/measured_rates.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

struct GpuDescription {
    std::string uuid;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
    std::string name;
    uint64_t physical_memory = 0;
};

struct Gpu {
    GpuDescription description;
    bool listed_by_host = false;  // from the driver's GPU list, not a client
    // Its memory size is the host's (NVML) or a root client's: what clients
    // claim changes it no more (Scheduler::claim_gpu).
    bool memory_confirmed = false;
    // The host's latest reading counted its processes' memory (NVML): a
    // client it has not read yet is one it will, not one it cannot say of.
    bool host_counts_processes = false;
    std::optional<uint32_t> named_by;  // else: the uid whose client first named it
    uint64_t capacity = 0;             // bytes the scheduler lets clients use together
    std::vector<ClientId> holders;
    uint64_t grants = 0;      // lock grants on this GPU so far
    Duration last_swap_in{};  // latest bulk swap-in reported by any client (shown)
    // What its clients measured memory to move at (Scheduler::report_rates),
    // or, until one did, what was kept from before a restart.
    MeasuredRates rates;
};

}  // namespace nvshare::daemon
