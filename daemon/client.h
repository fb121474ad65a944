// A client as nvshared knows it: who it is, what it reported, where it stands
// with the lock, and what it was last told. The Scheduler owns these; the
// usage ledger, the status document and the bus objects read them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/protocol.h"
#include "daemon/claim_grace.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

using Mode = proto::Mode;
using WaitReason = proto::WaitReason;
using Priority = proto::Priority;

struct SwapStats {
    uint64_t bytes_prefetched = 0;
    uint64_t bytes_evicted = 0;
    uint64_t swap_ins = 0;
    Duration swap_in_time{};
    uint64_t swap_outs = 0;
    Duration swap_out_time{};
};

struct MemoryUse {
    uint64_t managed = 0;  // pageable
    uint64_t pinned = 0;   // never evicted, as the client reported it
    // The part of `pinned` others are told of and make room for: all of it
    // for a client of root, else what the host confirms (the GPU memory
    // NVML counts for the process: Scheduler::confirm_memory). The rest
    // counts for the client's own scheduling alone.
    uint64_t confirmed_pinned = 0;
    // The part of `managed` others are told of and make room for: at most
    // the GPU's size (or its capacity where larger), and for a client of a
    // user other than root what the host confirms (its GPU memory beyond
    // confirmed_pinned and its resident host memory) or what its grace
    // still covers (claim_grace.h; where the host cannot say, all of it).
    // The rest counts for its own fit alone.
    uint64_t confirmed_managed = 0;
    uint64_t total() const { return managed + pinned; }                       // its own view
    uint64_t shared() const { return confirmed_managed + confirmed_pinned; }  // everybody else's
};

enum class Phase { Idle, Waiting, Holding };

// What a waiting client is told about one GPU it waits for.
struct WaitFacts {
    std::optional<ClientId> holder;  // none: an earlier waiter or another GPU is in the way
    uint32_t place = 0;              // in the GPU's queue: 1 = next
    WaitReason reason = WaitReason::ModeOn;
    TimePoint held_since{};  // the holder's grant
    Duration quantum{};      // the holder's quantum
    // Changes worth telling: the holder's time moves on by itself.
    bool same_news(const WaitFacts& o) const
    {
        return holder == o.holder && place == o.place && reason == o.reason &&
               held_since == o.held_since && quantum == o.quantum;
    }
};

struct ClientInfo {
    ClientInfo() = default;
    // The cgroup is the server's to find; tests and tools name the rest.
    ClientInfo(int32_t pid_, uint32_t uid_, std::string comm_, std::string cgroup_ = {})
        : pid(pid_), uid(uid_), principal(uid_), comm(std::move(comm_)), cgroup(std::move(cgroup_))
    {
    }
    int32_t pid = 0;
    uint32_t uid = 0;
    // Who it is charged to for fairness and usage: its uid, or the owner of
    // the subordinate uid it is (principals.h). Never root's exemptions.
    uint32_t principal = 0;
    std::string comm;
    std::string cgroup;   // its container or unit (process_cgroup.h); may be empty
    std::string command;  // its command line (process_command.h); may be empty
    // Its class, as the daemon settled it (the process's wish within the
    // admin's rules); never Unset.
    Priority priority = Priority::Normal;
};

struct ClientRecord {
    ClientId id = 0;
    ClientInfo info;
    std::vector<GpuIndex> gpus;  // in the client's Hello order: local index -> GpuIndex
    std::map<GpuIndex, MemoryUse> memory;
    // What the host confirms of its memory on each GPU (NVML's figure for
    // the process), where it was asked; confirmed_pinned is bounded by it.
    std::map<GpuIndex, uint64_t> host_confirms;
    // Its resident host memory (anonymous: where the library keeps
    // swapped-out copies), as the host last read it; it confirms its
    // managed memory beside host_confirms, GPU by GPU in index order.
    std::optional<uint64_t> host_resident;
    // Each GPU's grace for managed memory the host does not confirm yet.
    std::map<GpuIndex, ClaimGrace> graces;
    std::optional<TimePoint> grew_at;  // when its memory last grew (on any GPU)
    std::map<GpuIndex, SwapStats> swaps;
    std::map<GpuIndex, Duration> last_swap_in;  // its own latest bulk swap-in
    // Managed memory it left on each oversubscribed GPU when it last let go
    // (what the latest Drop or Contended allowed, or a Shrink since); all
    // of it while holding.
    std::map<GpuIndex, uint64_t> kept;
    uint64_t keep_offered = 0;
    // This hold's Grant, Drop or Contended said its GPUs are oversubscribed:
    // only then does it move data off them when it lets go.
    bool told_oversubscribed = false;
    // Others' pinned memory on each GPU as last told to the client.
    std::map<GpuIndex, uint64_t> unpageable_sent;
    // Why it waits for each GPU, as last told (while Waiting).
    std::map<GpuIndex, WaitFacts> wait_sent;

    Phase phase = Phase::Idle;
    // When it last registered, asked for a GPU or let go (its last use).
    TimePoint last_active{};
    GpuSet wanted = 0;  // while Waiting
    uint64_t sequence = 0;
    TimePoint waiting_since{};

    GpuSet held = 0;  // while Holding
    TimePoint granted_at{};
    std::optional<TimePoint> first_granted_at;  // its start (policy::settled_at)
    bool contended_sent = false;
    bool bounded_sent = false;                 // told to keep its queued work short (this hold)
    std::optional<TimePoint> contended_since;  // first told that others want its GPUs
    // Its typical burst: how long its holds last from the request its work
    // sent to the release it chose when others wanted the GPU (0: not known).
    Duration burst{};
    bool drop_sent = false;
    TimePoint drop_deadline{};
    // Next time tick() must look at this client; none while it is among a
    // GPU's soft-turn followers (`follows`), whose deadline is theirs
    // (Scheduler::deadline_of).
    std::optional<TimePoint> deadline;
    std::optional<GpuIndex> follows;
    // The GPU whose soft-turn followers it would be among once its own
    // bound (the time) comes, until then.
    std::optional<std::pair<GpuIndex, TimePoint>> pending;

    // Statistics over the client's life.
    Duration held_total{};
    Duration waited_total{};
    uint64_t grants = 0;
    uint64_t drops = 0;
    uint64_t revocations = 0;

    GpuSet registered() const;
    // Client-local masks (bit i = i-th GPU of its Hello) <-> daemon-wide sets.
    // to_global returns nullopt if the mask names a GPU the client never did.
    std::optional<GpuSet> to_global(uint64_t local_mask) const;
    uint64_t to_local(GpuSet set) const;
};

}  // namespace nvshare::daemon
