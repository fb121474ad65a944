// The memory room of each GPU: what its clients use and leave there, and
// what they are told of it. The one owner of the per-GPU memory accounting
// (requested, pinned, kept), the keep allowance, the Shrink rounds, the fit
// checks of group turns and the Unpageable notices. Part of the scheduler,
// and pure like it: no I/O, the time comes with the calls that need it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon/action.h"
#include "daemon/client.h"
#include "daemon/gpu.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

// What the room asks of the scheduler's lines: who is registered on a GPU,
// and the one order in which its waiters go (class, the user's held time,
// arrival). The room keeps no order of its own: the room it leaves is for
// whoever the grant will really go to.
struct Lineup {
    std::function<const std::set<ClientId>&(GpuIndex gpu)> members;
    // The waiters of `gpu` in the order they go.
    std::function<std::vector<ClientId>(GpuIndex gpu)> in_order;
    // The first of them that is not `besides`.
    std::function<std::optional<ClientId>(GpuIndex gpu, ClientId besides)> goes_next;
};

class Room {
public:
    // It reads the scheduler's GPUs (capacity, size, holders) and clients,
    // and writes only the clients' memory facts (memory, host_confirms,
    // kept, keep_offered, told_oversubscribed, unpageable_sent).
    Room(const std::vector<Gpu>& gpus, std::map<ClientId, ClientRecord>& clients, Lineup lineup);
    Room(const Room&) = delete;
    Room& operator=(const Room&) = delete;

    // A Shrink asks for at least this much: the library moves whole chunks
    // of up to 64 MiB, and smaller differences are within its headroom.
    static constexpr uint64_t kShrinkStep = uint64_t{64} << 20;
    // A Shrink round that comes between these two after the last on its GPU
    // asks for at least twice that one's room (room_to_ask): the holder
    // still grows, and waited for the last round to be answered.
    static constexpr Duration kAnsweredRound = std::chrono::milliseconds(150);
    static constexpr Duration kGrowthRound = std::chrono::seconds(2);

    // A GPU was added (after those before it): nobody uses it yet.
    void add_gpu();

    // ---- what clients use ---------------------------------------------------
    // Memory reported by the GPU's clients as others see it (MemoryUse::shared).
    uint64_t requested(GpuIndex gpu) const;
    // Whether that exceeds the GPU's capacity (on any of `gpus`).
    bool oversubscribed(GpuIndex gpu) const;
    bool oversubscribed_any(GpuSet gpus) const;
    // A client's memory on `gpu` as it reported it; the host's figures
    // (confirm, ClientRecord::host_resident) bound what others count of it
    // (MemoryUse::confirmed_pinned, confirmed_managed; its grace at `now`).
    // Tells the others where their view of its pinned memory moved. What
    // the host confirms on its later GPUs depends on this one (host_share):
    // they are set again after it.
    // `turn`: where it stands in the GPU's turns (ClaimGrace::counted).
    // Where its grace on `gpu` started, moved or ended, grace_ended()
    // follows.
    void set(ClientRecord& c, GpuIndex gpu, MemoryUse use, TimePoint now, std::vector<Action>& out,
             ClaimTurn turn = ClaimTurn::None);
    // What the host confirms of the client's memory on `gpu` (nullopt: it
    // can no longer say); applies at the next set().
    static void confirm(ClientRecord& c, GpuIndex gpu, std::optional<uint64_t> bytes);
    // The client registered on `gpu`: it is told the others' pinned memory
    // there (tell_unpageable).
    void joined(const ClientRecord& c, GpuIndex gpu, std::vector<Action>& out);
    // The client is leaving: its memory no longer counts, and a grace of
    // its that the host never confirmed bars its user's new graces on that
    // GPU for kClaimDebt.
    void forget(const ClientRecord& c, TimePoint now);
    // When the first running grace of a client's unconfirmed claim ends
    // (claim_grace.h), as set() last saw it.
    std::optional<TimePoint> next_grace_end() const;
    // The client and GPU of a grace that ended by `now`, taken off the
    // list: what it counts for others must be set() again. Nullopt: none.
    std::optional<std::pair<ClientId, GpuIndex>> grace_ended(TimePoint now);
    // Tells each client of `gpu` the pinned memory of the others where it
    // moved by kUnpageableStep or more since it was last told (its members
    // changed, or their pinned memory), in the order of their ids.
    void tell_unpageable(GpuIndex gpu, std::vector<Action>& out);

    // ---- holds ---------------------------------------------------------------
    // `c` was granted what it holds: nothing is offered it yet.
    void granted(ClientRecord& c);
    // `c` lets go of `gpus`: what it leaves there, as its last offer
    // allowed if it was told of the oversubscription, else everything.
    void let_go(ClientRecord& c, GpuSet gpus);
    // `c`'s hold is taken away: it did not let go, so all its data stayed.
    static void revoked(ClientRecord& c) { c.keep_offered = UINT64_MAX; }
    // Fills in what action `a` says of the room: whether its GPUs are
    // oversubscribed, and for a Drop, Contended or contended Grant the keep
    // allowance (remembered as offered).
    void describe(Action& a);

    // ---- fit -----------------------------------------------------------------
    // Whether `c`'s memory fits beside that of the holders of `gpu`.
    bool fits_beside_holders(const ClientRecord& c, GpuIndex gpu) const;
    // Whether it fits beside the holders that stay: those not asked to let
    // go (ClientRecord::drop_sent).
    bool fits_beside_staying(const ClientRecord& c, GpuIndex gpu) const;
    // Of the holders of a GPU taken in group turns, in the order they were
    // granted: those whose memory no longer fits beside that of the ones
    // before them (the first always keeps it).
    std::vector<ClientRecord*> beyond_fit(GpuIndex gpu,
                                          const std::vector<ClientRecord*>& holders) const;
    // Until when the holders of `gpu` count as short of room: kGrowthRound
    // after its latest Shrink round (none: the past).
    TimePoint short_of_room_until(GpuIndex gpu) const;

    // ---- Shrink --------------------------------------------------------------
    // The holders or the memory of `gpus` changed: publish_shrinks looks again.
    void changed(GpuSet gpus) { dirty_ |= gpus; }
    // `c`, a holder of `gpu`, measured that its new memory needs `bytes` more
    // than the GPU has free: memory no report counts (contexts, the driver's
    // own) fills what the reported sums leave. The next Shrink round there
    // asks for at least that much (once). Ignored from a client not holding
    // `gpu`; at most the GPU's size counts.
    void want_room(const ClientRecord& c, GpuIndex gpu, uint64_t bytes);
    // On GPUs that changed since the last call: asks clients that do not
    // hold the GPU to leave less memory there where what they left and what
    // the holders use exceed its capacity (oversubscribed GPUs), or by what
    // a holder wants (want_room). The next waiters keep theirs longest;
    // clients not waiting give first. Returns the GPUs where it asked (when
    // their other clients may join moved).
    GpuSet publish_shrinks(TimePoint now, std::vector<Action>& out);

private:
    struct GpuRoom {
        uint64_t requested = 0;  // MemoryUse::shared of its clients
        uint64_t pinned = 0;     // their confirmed pinned memory
        // The managed memory those that do not hold it keep there (kept_part).
        uint64_t kept = 0;
        // Each client's own confirmed pinned memory plus the others' as it
        // was last told: it is told again where that is kUnpageableStep or
        // more away from `pinned`, so those due are at the two ends.
        std::set<std::pair<uint64_t, ClientId>> told_pinned;
        // The latest Shrink round: the room it asked of all who keep memory
        // here, and when.
        uint64_t room_asked = 0;
        TimePoint room_asked_at{};
        // What a holder wants beyond the reported sums (want_room), until
        // the next round.
        uint64_t wanted = 0;
    };
    // A user's graces on one GPU (ClaimGrace): how many of their clients
    // owe one (the host has not confirmed it yet), and until when a process
    // of theirs that ended owing one bars new ones.
    struct UserGraces {
        uint32_t unpaid = 0;
        TimePoint barred_until{};
    };
    using UserGpu = std::pair<uint32_t, GpuIndex>;  // (principal, GPU)
    // Whether `c` may start a grace on `gpu` at `now`: no other client of its
    // user owes one there, and none that ended owing one bars it. `owes`:
    // whether `c` itself owes one.
    bool may_start_grace(const ClientRecord& c, GpuIndex gpu, bool owes, TimePoint now);
    // The most of a swappable claim on `gpu` that counts for others: its
    // size, or its capacity where that is set larger (what the scheduler
    // lets its clients use).
    uint64_t size_of(GpuIndex gpu) const;
    // The part of `c`'s resident host memory that may confirm its managed
    // memory on `gpu`: what its GPUs before `gpu` did not need of it.
    uint64_t host_share(const ClientRecord& c, GpuIndex gpu) const;
    // What `c` keeps on `gpu` that counts in GpuRoom::kept while it does not
    // hold it: what it left there, as far as it still has it (and counts
    // for others).
    static uint64_t kept_part(const ClientRecord& c, GpuIndex gpu);
    // Its key in GpuRoom::told_pinned.
    static std::pair<uint64_t, ClientId> told_pinned_key(const ClientRecord& c, GpuIndex gpu);
    static std::optional<TimePoint> grace_end(const ClientRecord& c, GpuIndex gpu);
    // The memory that must stay on `gpu` for its holders: theirs, and the
    // pinned memory of every client of the GPU.
    uint64_t holders_need(GpuIndex gpu, bool staying_only = false) const;
    // Managed bytes `c` may leave on `gpus` when it lets go: on an
    // oversubscribed GPU, what fits beside the next waiter's memory and what
    // everybody else keeps there (pinned memory, what others left behind).
    uint64_t keep_allowance(const ClientRecord& c, GpuSet gpus) const;
    // How much of what those who do not hold `gpu` keep there a Shrink round
    // asks for, `short_by` being what the holders lack.
    uint64_t room_to_ask(GpuIndex gpu, uint64_t short_by, TimePoint now) const;

    const std::vector<Gpu>& gpus_;
    std::map<ClientId, ClientRecord>& clients_;
    Lineup lineup_;
    std::vector<GpuRoom> rooms_;  // parallel to gpus_
    GpuSet dirty_ = 0;            // GPUs for publish_shrinks() to look at
    // When the grace of a client's unconfirmed managed memory on a GPU ends.
    std::set<std::tuple<TimePoint, ClientId, GpuIndex>> grace_ends_;
    // Users with a grace unpaid or barred; an entry goes once neither holds.
    std::map<UserGpu, UserGraces> user_graces_;
};

}  // namespace nvshare::daemon
