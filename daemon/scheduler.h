// The scheduling core of nvshared: which client may put work on which GPU.
// Pure logic: events in (with the current time), actions out. No I/O, no
// clock of its own, so tests drive it exhaustively and deterministically.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "daemon/action.h"
#include "daemon/client.h"
#include "daemon/deadlines.h"
#include "daemon/gpu.h"
#include "daemon/gpu_table.h"
#include "daemon/member_classes.h"
#include "daemon/room.h"
#include "daemon/run_ahead.h"
#include "daemon/scheduler_types.h"
#include "daemon/soft_followers.h"
#include "daemon/soft_join.h"
#include "daemon/turn_policy.h"
#include "daemon/turn_styles.h"
#include "daemon/usage.h"
#include "daemon/wait_notices.h"
#include "daemon/waiting_line.h"

namespace nvshare::daemon {

struct SchedulerSettings {
    Mode mode = Mode::Auto;
    Duration time_quantum = std::chrono::seconds(30);
    Duration grace = std::chrono::seconds(10);
    // The most a client's own swap-in reports may stretch its quantum to.
    Duration quantum_ceiling = std::chrono::seconds(60);
};

class Scheduler {
public:
    explicit Scheduler(SchedulerSettings settings = {});
    // Its room reads its GPUs and clients where they are.
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // ---- GPUs -----------------------------------------------------------
    // Finds or adds a GPU the host lists, or one named in the Hello of a
    // client of user `uid` (GpuTable::ensure, GpuTable::claim).
    std::optional<GpuIndex> ensure_gpu(const GpuDescription& description);
    std::optional<GpuIndex> claim_gpu(const GpuDescription& description, uint32_t uid,
                                      uint32_t principal, TimePoint now, std::string* refusal);
    std::optional<GpuIndex> claim_gpu(const GpuDescription& description, uint32_t uid,
                                      TimePoint now, std::string* refusal)
    {
        return claim_gpu(description, uid, uid, now, refusal);
    }
    // Capacity for GPUs not yet seen: by UUID, else the default, else physical.
    void set_capacity_override(const std::string& uuid, uint64_t bytes);
    void set_default_capacity(std::optional<uint64_t> bytes);
    void set_capacity(GpuIndex gpu, uint64_t bytes, TimePoint now);

    // ---- settings --------------------------------------------------------
    void set_mode(Mode mode, TimePoint now);
    void set_time_quantum(Duration tq, TimePoint now);
    // A GPU's own mode or time quantum (by UUID, for GPUs not yet seen too);
    // nullopt: it follows the host-wide setting again.
    void set_gpu_mode(const std::string& uuid, std::optional<Mode> mode, TimePoint now);
    void set_gpu_time_quantum(const std::string& uuid, std::optional<Duration> tq, TimePoint now);
    Mode mode_of(GpuIndex gpu) const;
    Duration time_quantum_of(GpuIndex gpu) const;
    const std::map<std::string, Mode>& gpu_modes() const { return gpus_.modes(); }
    const std::map<std::string, Duration>& gpu_time_quanta() const { return gpus_.time_quanta(); }
    void set_grace(Duration grace);
    void set_quantum_ceiling(Duration ceiling, TimePoint now);
    const SchedulerSettings& settings() const { return settings_; }

    // ---- client events ---------------------------------------------------
    // Returns false if the id is in use or a GPU index is unknown. `now`:
    // when it registered (else the latest event's time).
    bool connect(ClientId id, ClientInfo info, std::vector<GpuIndex> gpus,
                 std::optional<TimePoint> now = std::nullopt);
    // A Request replaces what the client holds or waits for: holding some GPUs
    // while waiting for others is never allowed, so multi-GPU clients cannot
    // deadlock each other.
    void request(ClientId id, GpuSet gpus, TimePoint now);
    void release(ClientId id, GpuSet gpus, TimePoint now);
    // False, changing nothing, for a report past the bounds above. Pinned
    // and managed memory are bounded by the GPU's size, and only their
    // confirmed parts (MemoryUse::confirmed_pinned, confirmed_managed)
    // change what others are told or get; the rest counts for the client's
    // own fit alone.
    bool report_memory(ClientId id, GpuIndex gpu, MemoryUse use, TimePoint now);
    // A holder of `gpu` measured that its new memory needs `bytes` more than
    // the GPU has free: those that keep memory there are asked for at least
    // that much (Room::want_room). Nothing from a client not holding it.
    void want_room(ClientId id, GpuIndex gpu, uint64_t bytes, TimePoint now);
    // What the host confirms of the client's memory on `gpu` (NVML's count
    // for its process); nullopt: the host can no longer say. A client of
    // root needs none.
    void confirm_memory(ClientId id, GpuIndex gpu, std::optional<uint64_t> bytes, TimePoint now);
    // Whether the host's latest reading of `gpu` counted its processes'
    // memory. Where it does, a client it has not read yet confirms nothing
    // until it is read: its claim counts for others under its grace alone.
    void set_host_counts_processes(GpuIndex gpu, bool counts);
    // What the host confirms of the client's resident host memory, where
    // swapped-out copies of its managed memory live (nullopt: it cannot
    // say). With the GPU's figure it confirms the client's managed memory
    // (MemoryUse::confirmed_managed); beyond that an increase counts for
    // others for kClaimGrace (claim_grace.h). Bounded by the GPU's size
    // either way; a client of root needs none.
    void confirm_host_memory(ClientId id, std::optional<uint64_t> bytes, TimePoint now);
    bool report_swaps(ClientId id, GpuIndex gpu, const SwapStats& stats, TimePoint now);
    // Rates a client measured on `gpu`, plausible ones (measured_rates.h):
    // each figure given replaces the GPU's. True where the GPU had lacked
    // one of them. Also what was kept from before a restart, for a GPU that
    // knows none yet.
    bool report_rates(GpuIndex gpu, const MeasuredRates& rates);
    void disconnect(ClientId id, TimePoint now);
    // Takes the lock away from a holder now. False if it holds nothing.
    bool revoke(ClientId id, TimePoint now);

    // ---- time -------------------------------------------------------------
    // Acts on quanta and grace periods that have run out by `now`.
    void tick(TimePoint now);
    // When tick() next has something to do, if ever.
    std::optional<TimePoint> next_deadline() const;

    // Actions produced since the last call, in order.
    std::vector<Action> take_actions();

    // ---- views -------------------------------------------------------------
    const std::vector<Gpu>& gpus() const { return gpus_.gpus(); }
    const std::map<ClientId, ClientRecord>& clients() const { return clients_; }
    const ClientRecord* client(ClientId id) const;
    uint64_t requested_memory(GpuIndex gpu) const;
    // How the clients of this GPU share it now (Turns), and whether that
    // is one holder or one group at a time (Strict or Groups): what the
    // status and the bus call serializing.
    Turns turns(GpuIndex gpu) const { return turns_.of(gpu); }
    bool serializing(GpuIndex gpu) const { return turns_.serializing(gpu); }
    bool oversubscribed(GpuIndex gpu) const;
    // The longest a client may hold while others wait: the quantum of its
    // GPUs, but at least kQuantumPerSwap times its own latest swap-in on the
    // GPUs it holds (so that switching never takes more than about a tenth of
    // the GPU's time), up to kMaxQuantumStretch times the quantum (what a
    // client reports about itself never takes the admin's quantum further)
    // and the quantum ceiling; cut short while a waiter of a higher class
    // waits (policy::preempted_quantum).
    Duration quantum_for(const ClientRecord& c) const;
    static constexpr int kQuantumPerSwap = 10;
    static constexpr int kMaxQuantumStretch = 4;
    // A waiter among the first kNamedPlaces of a GPU's line is told of every
    // change (the holder, its place, the reason, the quantum); one further
    // back only that processes are ahead of it, its place and its reason,
    // when it is queued, when its place enters or leaves the first
    // kNamedPlaces and when the GPU's own reason changes (wait_notices.h): an
    // event then sends at most 2 x kNamedPlaces Waiting messages a GPU
    // besides one to each waiter it queued, however many wait.
    static constexpr uint32_t kNamedPlaces = WaitNotices::kNamedPlaces;
    // Waiting clients that want this GPU, in the order they go: by rank
    // (class, raised by waiting), then by their user's held time, then first
    // come first.
    std::vector<ClientId> queue(GpuIndex gpu) const;
    // Each user's held time (seconds, decaying), as the order uses it.
    double user_held(uint32_t uid, TimePoint now) const { return shares_.held(uid, now); }
    // Why client `id` waits for `gpu` now, at its exact place, as it would be
    // told (WaitNotices::due); nullopt if it does not wait for it, or the GPU
    // is not taken in turns (then it waits for another one).
    std::optional<WaitFacts> wait_facts(ClientId id, GpuIndex gpu) const;
    // When tick() must look at client `id` next (ClientRecord::deadline, or
    // its followers' where it is among a GPU's soft-turn followers).
    std::optional<TimePoint> deadline_of(ClientId id) const;
    size_t holding_count() const { return holding_; }
    size_t waiting_count() const { return waiting_; }
    // Every user's use of every GPU, exited clients included.
    std::map<UsageKey, Usage> usage(TimePoint now) const { return usage_.totals(clients_, now); }

private:
    // Every event touches only the GPUs and clients it concerns: each GPU's
    // waiters sit in its line (waiting_line.h), which finds the first ones
    // and any one's place without walking it; what they were told, with
    // only the first kNamedPlaces, those told a place among them and those
    // told nothing yet to look at (wait_notices.h); its clients by class and
    // activity (member_classes.h); deadlines in one ordered set. So a
    // request, a release, a hand-over, a connect or a disconnect on a GPU
    // taken in strict or group turns costs O(B^2 log^2 N) for N clients and
    // B (user, class) pairs waiting on the GPU, and sends at most
    // 2 x kNamedPlaces Waiting messages a GPU besides one to each waiter it
    // queues, however many users wait.
    //
    // In soft turns a waiter that has not started, is not interactive and
    // waits for this GPU alone among those taken in turns joins when its own
    // bound (policy::join_after) and the holders' start have come. Once its
    // bound has come it is among the GPU's followers (soft_followers.h),
    // whose one deadline is the holders' start, kept once in the deadline
    // set under the smallest follower's id; until then it is pending there,
    // its deadline its bound, looked at again only where the holders' start
    // passes that bound. The followers come due together, at once where
    // nothing else comes due among them and none of them may go, else one by
    // one, so that who joins first among those due at once is decided in
    // (time, client) order as if each had its own deadline. An event that
    // may let a waiter join (admit) looks at the other, loose, waiters in
    // line order and, while no holder is starting, at the first follower in
    // line of each user below its share (the only one of them that may go
    // then), and moves the followers' deadline once; a client's first
    // growth and a Shrink round move it once too. Such an event costs
    // O((L + 1) B (H + B) log N) for L loose waiters and H holders, so
    // O(B (H + B) log N) where every waiter is a follower or pending
    // (bench/scheduler_cost --auto, with and without --mixed, measures it).
    // What still looks at every waiter of a GPU, O(N):
    //  - in soft turns, the loose waiters at every admission, each with its
    //    own join time: interactive ones, normal ones whose bursts are long
    //    (their join time reads the holders' bursts), those that wait for
    //    several GPUs taken in turns, and those that have started (granted
    //    before);
    //  - followers due together one by one where one of them may go (no
    //    holder starting and a user below its share) or something else
    //    comes due among their ids at the same time;
    //  - a client's first memory growth after its first grant, once in its
    //    life: its GPUs' members that are not followers there (holders,
    //    loose waiters, idle clients);
    //  - at a grant or a contention notice in soft turns (wanted_by_others),
    //    only where no holder is starting and no follower waits: the line
    //    until a waiter that starts next, all of it where none does;
    //  - rare changes: a GPU's turn style (reschedule_all: every waiter is
    //    queued again and told the new reason), a Shrink round (the members
    //    that are not followers) and settings changed at run time (mode,
    //    capacity, grace, quantum ceiling; a quantum moves the followers' and
    //    pending waiters' bounds: they become loose, one by one).
    struct GpuQueue {
        WaitingLine line;
        std::set<ClientId> members;
        MemberClasses classes;
        WaitNotices notices;
        SoftFollowers followers;  // and the members that are not among them
    };

    ClientRecord* find(ClientId id);
    // A client's memory on a GPU changed, as reported or as confirmed.
    void set_memory(ClientRecord& c, GpuIndex gpu, MemoryUse use, TimePoint now);
    // The same without tick(): the room of `gpu` and of the client's later
    // GPUs (what the host confirms there depends on it).
    void refresh_memory(ClientRecord& c, GpuIndex gpu, MemoryUse use, TimePoint now);
    // Room::set, where the client stands in `gpu`'s turns: its grace lasts
    // while it waits for its first turn there and from that turn's grant
    // (`just_granted`: ClaimGrace::counted).
    void set_room(ClientRecord& c, GpuIndex gpu, MemoryUse use, TimePoint now,
                  bool just_granted = false);
    // The memory of a GPU's clients or its capacity changed: its style may
    // have changed, and in group turns who fits together.
    void room_changed(GpuIndex gpu, TimePoint now);
    // A GPU joined the table: its queue and room, and its turn style.
    void add_gpu();
    // Works every GPU's style out again from its mode and memory.
    TurnStyles::Change update_turns();
    // What the order of waiters depends on at `now` (WaitingLine).
    LineOrder line_order(TimePoint now) const { return {now, settings_.time_quantum, &shares_}; }
    std::optional<ClientId> head(GpuIndex gpu, TimePoint now) const;
    std::vector<ClientId> ordered(GpuIndex gpu, TimePoint now) const;
    // The first waiter of `gpu` by that order that is not `besides`.
    std::optional<ClientId> goes_next(GpuIndex gpu, ClientId besides) const;
    // What the room asks of the queues: the members and that order.
    Lineup lineup();
    int best_waiting_class(GpuSet gpus) const;  // policy::class_rank of the best
    // What the join rules read of `gpu`'s turn (soft_join.h).
    soft_join::Turn turn(GpuIndex gpu) const
    {
        return {gpus_[gpu].holders, clients_, queues_[gpu].line};
    }
    bool wanted_by_others(const ClientRecord& c, TimePoint now) const;
    // Tells a holder that others want its GPUs, once per grant.
    void tell_contended(ClientRecord& c, TimePoint now);
    // Grants every waiter of `gpus` that may go now, in order.
    void admit(GpuSet gpus, TimePoint now);
    void push(ActionKind kind, const ClientRecord& c, GpuSet gpus, Duration grace = {});
    // The styles again, and what follows where one changed.
    void refresh_turns(TimePoint now);
    void enqueue(ClientRecord& c);
    void dequeue(ClientRecord& c);
    // The one place where a client's phase and last use change: its GPUs'
    // MemberClasses follow.
    void set_activity(ClientRecord& c, Phase phase, TimePoint last_active);
    bool grantable(const ClientRecord& c, TimePoint now) const;
    // Whether waiter `c` may join the holders of a GPU taken in group turns:
    // it is first in line, they have started and its memory fits beside theirs.
    bool joins_group(const ClientRecord& c, GpuIndex gpu, TimePoint now) const;
    // The holders of a GPU taken in turns keep it in the order they were
    // granted while their memory fits together; the others are asked to let go.
    void keep_holders_that_fit(GpuIndex gpu, TimePoint now);
    bool contended(const ClientRecord& c) const;
    // The same, of its GPUs in `gpus` only.
    bool contended_on(const ClientRecord& c, GpuSet gpus) const;
    void grant(ClientRecord& c, TimePoint now);
    GpuSet end_hold(ClientRecord& c, GpuSet gpus, TimePoint now);
    void send_drop(ClientRecord& c, TimePoint now, bool turns_begin = false);
    GpuSet revoke_hold(ClientRecord& c, TimePoint now, RevokeReason reason);
    WaitFacts facts_at(GpuIndex gpu, uint32_t place) const;
    // Tells the waiters of the GPUs whose queue, holder or quantum changed
    // since the last call what changed for them.
    void publish_waits();
    // Sends the room's Shrink rounds; where one went, the clients that do
    // not hold the GPU may join at another time (Room::short_of_room_until).
    void publish_shrinks();
    void try_heads(GpuSet freed, TimePoint now);
    void notify_contention(GpuSet gpus, TimePoint now);
    // Whether a holder's quantum runs: somebody waits whom its letting go
    // would help (contended); on a GPU taken in group turns, unless another
    // holder leaves and the first in line fits beside those that stay.
    bool quantum_runs(const ClientRecord& c) const;
    // When a holder must be asked to let go, if its quantum runs.
    std::optional<TimePoint> quantum_end(const ClientRecord& c) const;
    void update_deadline(ClientRecord& c);
    // After a time quantum or its ceiling changed: the holders' deadlines,
    // and with `waits` the soft turns' waits under way.
    void quanta_changed(bool waits, TimePoint now);
    void update_holder_deadlines(GpuSet gpus);
    // Soft-turn followers (soft_followers.h): the GPU whose followers waiter
    // `c` is among by its facts now, or will be once its own bound (the
    // time) comes: if it has not come by `now`, `c` is pending there;
    // whether one of them may join the holders now (false only where none
    // may).
    std::optional<std::pair<GpuIndex, TimePoint>> follower_gpu(const ClientRecord& c,
                                                               TimePoint now) const;
    bool a_follower_may_go(GpuIndex gpu, TimePoint now) const;
    // `c` leaves its GPU's followers or pending ones (among its loose
    // waiters where it still waits there).
    void leave_followers(ClientRecord& c, bool still_waiting);
    // Waiter `c` is pending on a GPU until the time (none: nowhere), with
    // deadline `deadline`.
    void set_pending(ClientRecord& c, std::optional<std::pair<GpuIndex, TimePoint>> pending,
                     std::optional<TimePoint> deadline);
    // The deadlines of `gpu`'s pending waiters worked out again where they
    // may have moved (SoftFollowers::to_update).
    void update_pending(GpuIndex gpu);
    // The deadlines of `gpu`'s members (but its holders, with `holders` false)
    // worked out again: its followers' at once.
    void update_member_deadlines(GpuIndex gpu, bool holders);
    void reschedule_all(TimePoint now, GpuSet became_serialized);

    SchedulerSettings settings_;
    GpuTable gpus_;
    std::vector<GpuQueue> queues_;  // parallel to gpus_
    std::map<ClientId, ClientRecord> clients_;
    Deadlines deadlines_;
    TurnStyles turns_;  // how each GPU is shared now
    TimePoint now_{};   // the latest time an event brought
    policy::UserShares shares_;
    GpuSet wait_dirty_ = 0;  // GPUs for publish_waits() to look at
    // GPUs taken in soft or group turns where a grant moved the line since
    // the event began: tick() looks at their waiters again.
    GpuSet line_moved_ = 0;
    RunAhead run_ahead_;  // which holders keep their queued work short
    size_t holding_ = 0;
    size_t waiting_ = 0;
    uint64_t next_sequence_ = 1;
    std::vector<Action> actions_;
    UsageLedger usage_;
    // The memory of every GPU: what its clients use and keep there.
    Room room_;
};

}  // namespace nvshare::daemon
