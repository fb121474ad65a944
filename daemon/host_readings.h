// What a round of the host's readings (MemoryWatch) changes: which clients'
// confirmations moved, whether the host counts each GPU's processes, and
// which GPUs and processes to read from now on. Pure: the server applies the
// result to the scheduler and the watch (Server::on_memory_readings).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/client.h"
#include "daemon/gpu.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

// One round of readings.
struct HostReadings {
    using Counts = std::map<int32_t, uint64_t>;  // pid -> bytes
    // NVML's per-process counts of each GPU read, by UUID; nullopt where
    // the host cannot say.
    std::map<std::string, std::optional<Counts>> gpus;
    // Each process's resident host memory, by pid; nullopt where the host
    // cannot say.
    std::map<int32_t, std::optional<uint64_t>> host;
};

// What the host is asked to read.
struct WatchSet {
    std::set<std::string> gpus;  // UUIDs
    std::set<int32_t> pids;
    // Adds a GPU and a process; whether the set changed.
    bool add(const std::string& gpu, int32_t pid);
    bool operator==(const WatchSet&) const = default;
};

// Whether a client's memory needs the host's confirmation: that of a user
// other than root does (Scheduler::confirm_memory, confirm_host_memory).
bool needs_confirming(const ClientInfo& client, const MemoryUse& use);

struct ReadingChanges {
    struct Confirm {  // for Scheduler::confirm_memory
        ClientId client = 0;
        GpuIndex gpu = 0;
        std::optional<uint64_t> bytes;
        bool operator==(const Confirm&) const = default;
    };
    struct HostConfirm {  // for Scheduler::confirm_host_memory
        ClientId client = 0;
        std::optional<uint64_t> bytes;
        bool operator==(const HostConfirm&) const = default;
    };
    // Each GPU read, in index order: whether the host counted its
    // processes (Scheduler::set_host_counts_processes).
    std::vector<std::pair<GpuIndex, bool>> counts_processes;
    std::vector<HostConfirm> host;  // confirmations that changed
    std::vector<Confirm> gpus;      // confirmations that changed
    // What to read from now on: the GPUs and processes of the memory that
    // needs confirming.
    WatchSet watch;
    bool confirmations_changed() const { return !host.empty() || !gpus.empty(); }
};

// What `readings` change for `clients` on `gpus` (the scheduler's): the
// clients of root are confirmed whole and skipped; a process NVML does not
// list on a GPU it counts confirms 0 there; a GPU NVML cannot count
// confirms nothing (nullopt); a GPU or process not read leaves its
// confirmations as they are.
ReadingChanges reading_changes(const std::map<ClientId, ClientRecord>& clients,
                               const std::vector<Gpu>& gpus, const HostReadings& readings);

}  // namespace nvshare::daemon
