// Test oracles: the first, simple O(clients) scheduler that rescans everything
// on every event (modes on and off), and a model of auto mode (AutoModel).
// Pure logic: events in (with the current time), actions out. No I/O, no
// clock of its own, so tests drive it exhaustively and deterministically.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/protocol.h"

namespace nvshare::reference {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = std::chrono::nanoseconds;
using Mode = proto::Mode;
using Priority = proto::Priority;

using ClientId = uint64_t;
using GpuIndex = uint32_t;  // daemon-wide, in order of discovery
using GpuSet = uint64_t;    // bit i = GpuIndex i

inline constexpr GpuIndex kMaxGpus = 64;

inline constexpr GpuSet gpu_bit(GpuIndex g)
{
    return GpuSet{1} << g;
}

struct SchedulerSettings {
    Mode mode = Mode::Auto;
    Duration time_quantum = std::chrono::seconds(30);
    Duration grace = std::chrono::seconds(10);
};

struct GpuDescription {
    std::string uuid;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
    std::string name;
    uint64_t physical_memory = 0;
};

struct Gpu {
    GpuDescription description;
    uint64_t capacity = 0;  // bytes the scheduler lets clients use together
    std::vector<ClientId> holders;
    uint64_t grants = 0;  // lock grants on this GPU so far
};

struct MemoryUse {
    uint64_t managed = 0;  // pageable
    uint64_t pinned = 0;   // never evicted
    uint64_t total() const { return managed + pinned; }
};

enum class Phase { Idle, Waiting, Holding };

struct ClientInfo {
    int32_t pid = 0;
    uint32_t uid = 0;
    std::string comm;
};

struct Client {
    ClientId id = 0;
    ClientInfo info;
    std::vector<GpuIndex> gpus;  // in the client's Hello order: local index -> GpuIndex
    std::map<GpuIndex, MemoryUse> memory;

    Phase phase = Phase::Idle;
    GpuSet wanted = 0;  // while Waiting
    uint64_t sequence = 0;
    TimePoint waiting_since{};

    GpuSet held = 0;  // while Holding
    TimePoint granted_at{};
    bool contended_sent = false;
    bool drop_sent = false;
    TimePoint drop_deadline{};

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

enum class ActionKind {
    Grant,      // client now holds `gpus`
    Drop,       // client must release `gpus` within the grace period
    Revoke,     // client's hold on `gpus` was taken away
    Contended,  // somebody waits for GPUs the client holds exclusively
};

struct Action {
    ActionKind kind;
    ClientId client;
    GpuSet gpus;
    bool exclusive = false;  // Grant: no other client runs on these GPUs
    bool contended = false;  // Grant: somebody already waits for them
    Duration grace{};        // Drop
};

enum class RevokeReason { GraceExpired, Admin };

class Scheduler {
public:
    explicit Scheduler(SchedulerSettings settings = {});

    // ---- GPUs -----------------------------------------------------------
    // Finds or adds a GPU by UUID; nullopt when kMaxGpus are known already.
    std::optional<GpuIndex> ensure_gpu(const GpuDescription& description);
    // Capacity for GPUs not yet seen: by UUID, else the default, else physical.
    void set_capacity_override(const std::string& uuid, uint64_t bytes);
    void set_default_capacity(std::optional<uint64_t> bytes);
    void set_capacity(GpuIndex gpu, uint64_t bytes, TimePoint now);

    // ---- settings --------------------------------------------------------
    void set_mode(Mode mode, TimePoint now);
    void set_time_quantum(Duration tq, TimePoint now);
    void set_grace(Duration grace);
    const SchedulerSettings& settings() const { return settings_; }

    // ---- client events ---------------------------------------------------
    // Returns false if the id is in use or a GPU index is unknown.
    bool connect(ClientId id, ClientInfo info, std::vector<GpuIndex> gpus);
    // A Request replaces what the client holds or waits for: holding some GPUs
    // while waiting for others is never allowed, so multi-GPU clients cannot
    // deadlock each other.
    void request(ClientId id, GpuSet gpus, TimePoint now);
    void release(ClientId id, GpuSet gpus, TimePoint now);
    void report_memory(ClientId id, GpuIndex gpu, MemoryUse use, TimePoint now);
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
    const std::vector<Gpu>& gpus() const { return gpus_; }
    const std::map<ClientId, Client>& clients() const { return clients_; }
    const Client* client(ClientId id) const;
    uint64_t requested_memory(GpuIndex gpu) const;
    // Whether clients of this GPU currently take turns rather than run together.
    bool serializing(GpuIndex gpu) const;
    // Waiting clients that want this GPU, first come first.
    std::vector<ClientId> queue(GpuIndex gpu) const;

private:
    Client* find(ClientId id);
    void grant(Client& c, TimePoint now);
    void end_hold(Client& c, GpuSet gpus, TimePoint now);
    void send_drop(Client& c, TimePoint now);
    void revoke_hold(Client& c, TimePoint now);
    std::vector<Client*> waiters_in_order();
    GpuSet exclusive_set() const;
    GpuSet wanted_by_waiters() const;
    void schedule(TimePoint now);

    SchedulerSettings settings_;
    std::vector<Gpu> gpus_;
    std::map<std::string, uint64_t> capacity_overrides_;
    std::optional<uint64_t> default_capacity_;
    std::map<ClientId, Client> clients_;
    uint64_t next_sequence_ = 1;
    std::vector<Action> actions_;
};

// ---- Auto mode ------------------------------------------------------------------
//
// Auto mode as nvshared(8) states it (SCHEDULING), as a model of what the
// scheduler must and may decide rather than a second scheduler: whether a
// waiter joins the holders softly depends on bursts the scheduler learns and
// on processes' start windows, which a model could only copy. The model is
// told the same events as the scheduler and the Grant, Drop, Revoke and
// Shrink actions the scheduler answered with; it keeps its own account of
// who waits for and holds what, and decides:
//  - each GPU's turn style from its mode, its capacity and the memory its
//    registered clients reported (exactly: turns());
//  - whether each action was one the scheduler may take (observe());
//  - what must hold after every event (check()).
// Memory here is what a client reported, managed plus pinned for root
// (whose pinned memory needs no host to confirm it); clients of other
// users are expected to report managed memory only.

// How the clients of a GPU share it.
enum class Turns {
    Free,    // off: all at once
    Soft,    // auto, their memory fits: turns at the end of bursts, joins
    Groups,  // auto, their memory exceeds the capacity: groups whose memory fits
    Strict,  // on: one holder at a time
};
Turns turns_for(Mode mode, uint64_t requested, uint64_t capacity);

// The times nvshared(8) states for auto mode (the model test holds them to
// the daemon's constants): a process that has just started keeps others from
// joining it at most this long after its first grant...
inline constexpr Duration kStartWindow = std::chrono::seconds(2);
// ...and the holders of a GPU taken in group turns count as short of room
// this long after a Shrink round there.
inline constexpr Duration kShrinkWindow = std::chrono::seconds(2);

class AutoModel {
public:
    AutoModel(Mode mode, Duration quantum, Duration grace);

    // ---- events: the same as the scheduler's, after time() -----------------
    void time(TimePoint now);  // the event's time; never earlier than the last
    GpuIndex add_gpu(uint64_t capacity);
    void set_capacity(GpuIndex gpu, uint64_t bytes);
    void set_mode(Mode mode);
    void set_quantum(Duration quantum);
    void connect(ClientId id, uint32_t uid, Priority cls, const std::vector<GpuIndex>& gpus);
    void request(ClientId id, GpuSet gpus);
    void release(ClientId id, GpuSet gpus);
    void report_memory(ClientId id, GpuIndex gpu, MemoryUse use);
    void disconnect(ClientId id);
    void revoke(ClientId id);  // the admin's

    // ---- the scheduler's answer, action by action ---------------------------
    // It may send
    //  - a Grant of what the client waits for (or again of what it holds, to
    //    a Request for it); on a GPU taken strictly or in group turns only to
    //    the first in line (where first_in_line() can say); strictly only
    //    while nobody holds it; in group turns beside holders none of which
    //    is leaving, where all their memory, its own and every client's
    //    pinned memory fit the capacity, and not within kShrinkWindow of a
    //    Shrink round there;
    //  - a Drop of all a client holds, once a hold, while another client
    //    holds or waits for one of its GPUs;
    //  - a Revoke of all it holds, once its grace period after the Drop ran
    //    out, or when the admin revokes it;
    //  - a Shrink of one GPU to a client that does not hold it, while the
    //    GPU's memory exceeds its capacity.
    enum class Did { Grant, Drop, Revoke, Shrink };
    void observe(Did what, ClientId id, GpuSet gpus);

    // What went wrong since the last call: actions it may not send, and
    // what must hold after every event and does not:
    //  - a Request for what a client holds is answered again; the admin's
    //    revocation of a holder is done;
    //  - a GPU taken strictly has one holder that is not leaving; in group
    //    turns, several only while their memory and every client's pinned
    //    memory fit the capacity (one alone may exceed it);
    //  - a holder asked to let go holds no longer than its grace period;
    //  - nobody waits for GPUs that are all free (mode off) or free and its
    //    turn (first in line);
    //  - softly, a waiter whose GPUs are all taken softly and used by its
    //    user alone joins within a quantum of its request (at once if
    //    interactive); later only while a holder there may still be
    //    starting: within kStartWindow of the latest grant there;
    //  - in group turns, a waiter for one GPU, first in line of a line of
    //    one user and one class, whose memory fits beside the holders, none
    //    of them leaving, joins within kStartWindow of the latest grant and
    //    kShrinkWindow of the latest Shrink round there.
    std::vector<std::string> check();

    // ---- what the model decides ---------------------------------------------
    struct Member {
        ClientId id = 0;
        uint32_t uid = 0;
        Priority cls = Priority::Normal;
        GpuSet registered = 0;
        std::map<GpuIndex, MemoryUse> memory;
        Phase phase = Phase::Idle;
        GpuSet wanted = 0;  // while Waiting
        TimePoint waiting_since{};
        uint64_t sequence = 0;               // order of arrival in the lines
        GpuSet held = 0;                     // while Holding
        std::optional<TimePoint> revoke_at;  // asked to let go: revoked then if it has not
    };
    Turns turns(GpuIndex gpu) const;
    uint64_t requested(GpuIndex gpu) const;  // what its clients' memory counts for others
    const std::map<ClientId, Member>& members() const { return members_; }
    std::set<ClientId> holders(GpuIndex gpu) const;
    // Who goes next on `gpu`, where the model can say: its waiters are all of
    // one user, so the order is by class, raised by one for every quantum
    // waited, then first come first; nullopt otherwise or if none waits.
    std::optional<ClientId> first_in_line(GpuIndex gpu) const;
    size_t waiting() const;

private:
    struct GpuState {
        uint64_t capacity = 0;
        std::optional<TimePoint> last_grant;
        std::optional<TimePoint> last_shrink;
    };
    uint64_t counted(const Member& m, GpuIndex gpu) const;  // managed + root's pinned
    uint64_t pinned_here(GpuIndex gpu) const;               // every client's counted pinned
    uint64_t managed(const Member& m, GpuIndex gpu) const;
    int rank(const Member& m) const;
    bool one_user_on(GpuSet gpus, uint32_t uid) const;
    bool one_class_waits(GpuIndex gpu) const;
    void fail(std::string what);
    void end_hold(Member& m, GpuSet gpus);

    Mode mode_;
    Duration quantum_;
    Duration grace_;
    TimePoint now_{};
    std::vector<GpuState> gpus_;
    std::map<ClientId, Member> members_;
    uint64_t next_sequence_ = 1;
    // The event was a Request for what the client holds already (a Grant
    // answers it again) or the admin's revocation of a holder.
    std::optional<ClientId> answer_again_;
    std::optional<ClientId> admin_revokes_;
    std::vector<std::string> failures_;
};

}  // namespace nvshare::reference
