// The nvshare wire protocol: fixed-layout frames over a local SOCK_STREAM
// Unix socket. This header is the single source of the format (its codec,
// which alone reads and writes frames, is common/codec.h); nvshare-protocol(7)
// describes it for humans. It is shared by nvshared, nvsharectl, the tests and
// libnvshare.so, so it uses only <cstdint>/<cstring>: no allocation, no
// exceptions, no C++ runtime (the preload library links nothing but libc).
//
// Integers are in host byte order: both ends always run on the same host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nvshare::proto {

inline constexpr uint32_t kMagic = 0x4853564eu;  // "NVSH" in little-endian memory order
inline constexpr uint16_t kVersion = 1;

// Largest payload the daemon accepts from a client. Every client message is
// far smaller; the bound is what keeps a lying length field harmless.
inline constexpr uint32_t kMaxClientPayload = 4096;
// Largest payload a client accepts from the daemon in a session's frames.
inline constexpr uint32_t kMaxDaemonPayload = 1u << 20;
// Largest Status payload (JSON, one entry per client): what status readers
// accept. The daemon cuts its client list to fit, and says how many it left out.
inline constexpr uint32_t kMaxStatusPayload = 64u << 20;

// GPUs a single client may name; client-local GPU indices fit a 64-bit mask.
inline constexpr uint32_t kMaxGpusPerClient = 32;
inline constexpr size_t kUuidBytes = 16;
inline constexpr size_t kCommBytes = 16;
inline constexpr size_t kGpuNameBytes = 64;

enum class MsgType : uint16_t {
    // client -> daemon
    Hello = 1,        // register: process name and the GPUs it uses
    Request = 2,      // ask for the lock on a set of GPUs
    Released = 3,     // gave back the lock (after Drop, or early on its own)
    Memory = 4,       // bytes this client has allocated on one GPU
    StatusQuery = 5,  // ask for a JSON status report (any peer, even unregistered)
    Stats = 6,        // swap statistics of one GPU (cumulative)
    Rates = 7,        // transfer rates measured on one GPU (to a daemon that sent KnownRates)
    // daemon -> client
    Welcome = 16,      // reply to Hello: client id and current settings
    Grant = 17,        // the client now holds the lock on these GPUs
    Drop = 18,         // give the lock back within the grace period
    Revoked = 19,      // the lock was taken away (grace expired or an admin said so)
    Settings = 20,     // mode, time quantum or a capacity changed
    Contended = 21,    // another client is waiting for GPUs this client holds
    Status = 22,       // JSON text answering StatusQuery
    Error = 23,        // the daemon refused a message; the connection is closed after it
    Unpageable = 24,   // memory other clients of one GPU hold that cannot be paged out
    Waiting = 25,      // why this client waits for a GPU: who holds it, its place, the reason
    RevokeCause = 26,  // sent just before Revoked: why the lock is taken away
    RunAhead = 27,     // keep queued GPU work short (or no longer): a higher class may come
    Shrink = 28,       // leave less memory on GPUs this client does not hold: others need room
    KnownRates = 29,   // transfer rates earlier clients measured on one GPU (after Welcome)
};

struct FrameHeader {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t length;  // payload bytes that follow the header
    uint32_t reserved;
};
static_assert(sizeof(FrameHeader) == 16);

enum class Mode : uint32_t { On = 0, Off = 1, Auto = 2 };

// ---- payloads ----------------------------------------------------------

struct HelloGpu {
    uint8_t uuid[kUuidBytes];
    uint64_t physical_memory;  // bytes, as the driver reports
    char name[kGpuNameBytes];  // NUL-padded; informational
};
static_assert(sizeof(HelloGpu) == 88);

// Followed by gpu_count HelloGpu records.
struct HelloFixed {
    uint32_t flags;  // bits 0-1: Priority asked for; the rest reserved, 0
    uint32_t gpu_count;
    char comm[kCommBytes];  // NUL-padded process name; informational only
};
static_assert(sizeof(HelloFixed) == 24);

// Followed by gpu_count uint64_t capacities, in the client's Hello order.
struct SettingsFixed {
    uint32_t mode;  // Mode
    uint32_t gpu_count;
    uint64_t time_quantum_us;
};
static_assert(sizeof(SettingsFixed) == 16);

struct WelcomeFixed {
    uint64_t client_id;
    SettingsFixed settings;
};
static_assert(sizeof(WelcomeFixed) == 24);

struct GpuMaskPayload {  // Request, Released, Revoked
    uint64_t gpus;       // bit i = the i-th GPU of this client's Hello
};

inline constexpr uint32_t kGrantExclusive = 1u;  // no other client runs on these GPUs
inline constexpr uint32_t kGrantContended = 2u;  // someone already waits for them
// The memory the GPU's clients report exceeds its capacity: data not in use
// should leave the GPU on release and come back by bulk prefetch on grant.
inline constexpr uint32_t kGrantOversubscribed = 4u;
// Grant: the hold starts bounded, as a RunAhead with kRunAheadBounded says.
inline constexpr uint32_t kGrantBounded = 16u;

// Managed memory (MiB) a holder of an oversubscribed GPU may leave on it when
// it lets go: what fits beside the next holder. Anything above is evicted.
inline constexpr uint32_t kKeepEverything = 0xFFFFFFFFu;

// Bytes (UINT64_MAX: everything) to whole MiB on the wire, rounded down so
// that the client never keeps more than allowed, and back.
inline constexpr uint32_t keep_to_wire(uint64_t keep_bytes)
{
    if (keep_bytes == UINT64_MAX)
        return kKeepEverything;
    const uint64_t mib = keep_bytes >> 20;
    return mib < kKeepEverything ? static_cast<uint32_t>(mib) : kKeepEverything - 1;
}
inline constexpr uint64_t keep_from_wire(uint32_t keep_mib)
{
    return keep_mib == kKeepEverything ? UINT64_MAX : static_cast<uint64_t>(keep_mib) << 20;
}

struct GrantPayload {  // Grant, Contended, Shrink
    uint64_t gpus;
    uint32_t flags;     // kGrant*
    uint32_t keep_mib;  // Contended, Shrink, Grant with kGrantContended: see kKeepEverything
};
static_assert(sizeof(GrantPayload) == 16);

// Drop flag: the GPU has just begun to be shared in turns (mode on, or its
// memory oversubscribed) while several clients ran on it; without it, the
// holder's time quantum ran out while others wait.
inline constexpr uint32_t kDropTurnsBegin = 8u;

struct DropPayload {
    uint64_t gpus;
    uint64_t grace_us;  // revoked if not Released within this
    uint32_t flags;     // kGrantOversubscribed, kDropTurnsBegin
    uint32_t keep_mib;  // as in Contended
};
static_assert(sizeof(DropPayload) == 24);

// Why a GPU is taken in turns, so that a client waits for it.
enum class WaitReason : uint32_t {
    Oversubscribed = 1,  // auto mode, and the memory its clients report exceeds its capacity
    ModeOn = 2,          // anti-thrashing mode is on
    Priority = 3,        // waiters of a higher priority class (or older by aging) go first
    Turns = 4,           // auto mode, memory fits: the holder's burst ends first
};

// A process's priority class (NVSHARE_PRIORITY, the admin's rules in
// nvshare.conf). Higher classes wait less; lower ones age, never starve.
enum class Priority : uint32_t { Unset = 0, Interactive = 1, Normal = 2, Batch = 3 };
// HelloFixed.flags bits 0-1: the class the process asks for (Unset: none).
inline constexpr uint32_t kHelloPriorityMask = 0x3u;

// Sent for each GPU a client waits for when it is queued, and again when the
// holder, the client's place, the reason or the holder's quantum changes;
// beyond the first kNamedPlaces only as the place enters or leaves them or
// the GPU's own reason changes (nvshare-protocol(7), Waiting): a place told
// there is as it was when sent.
inline constexpr uint32_t kNamedPlaces = 8;
struct WaitingPayload {
    uint32_t gpu;         // client-local index
    uint32_t reason;      // WaitReason
    uint32_t place;       // in the GPU's queue: 1 = next
    int32_t holder_pid;   // 0: nobody holds it (an earlier waiter or another GPU is in the way)
    uint32_t holder_uid;  // with holder_pid
    uint32_t reserved;
    uint64_t held_us;              // how long the holder has held it, when this was sent
    uint64_t quantum_us;           // the holder's time quantum
    char holder_comm[kCommBytes];  // NUL-padded printable UTF-8, from the holder's Hello
};
static_assert(sizeof(WaitingPayload) == 56);

enum class RevokeCauseCode : uint32_t {
    GraceExpired = 1,  // a Drop was not answered by Released within its grace period
    Admin = 2,         // an administrator revoked it (nvsharectl revoke, D-Bus RevokeClient)
};

// Precedes the Revoked frame it explains; clients that do not know it ignore it.
struct RevokeCausePayload {
    uint64_t gpus;   // as in the Revoked that follows
    uint32_t cause;  // RevokeCauseCode
    uint32_t reserved;
};
static_assert(sizeof(RevokeCausePayload) == 16);

// Sent to a holder of GPUs taken in turns when a process of a higher
// priority class is registered on one of them (bounded), and again when none
// is left (not bounded). A bounded holder keeps at most a few submissions
// queued on the GPU, so that when it is asked to let go its queued work
// drains at once instead of running for seconds. Ends with the hold.
inline constexpr uint32_t kRunAheadBounded = 1u;
struct RunAheadPayload {
    uint64_t gpus;   // client-local mask of the GPUs concerned
    uint32_t flags;  // kRunAheadBounded, or 0
    uint32_t reserved;
};
static_assert(sizeof(RunAheadPayload) == 16);

// Cumulative over the client's life, for one GPU: what nvshare's bulk
// migration moved and how long the moves took.
struct StatsPayload {
    uint32_t gpu;  // client-local index
    uint32_t reserved;
    uint64_t bytes_prefetched;  // host -> GPU on grant
    uint64_t bytes_evicted;     // GPU -> host on release
    uint64_t swap_ins;          // prefetch rounds completed
    uint64_t swap_in_us;        // total time of those rounds
    uint64_t swap_outs;
    uint64_t swap_out_us;
};
static_assert(sizeof(StatsPayload) == 56);

// Bytes a second at which memory moved on one GPU, as the library measured
// it (0: not measured): the swap engine's copies out and in (mapping
// included), the driver's migration of managed memory out and in, and the
// making of pinned host memory (the host's, the same for each GPU).
// Rates: the client's latest figures. KnownRates: the latest that any
// client reported for the GPU, sent once per GPU after Welcome, so that a
// process's first switch is costed at rates measured on this host rather
// than assumed ones; a client sends Rates only after a KnownRates, so that
// older daemons never see the type.
struct RatesPayload {
    uint32_t gpu;  // client-local index
    uint32_t reserved;
    uint64_t engine_out;
    uint64_t engine_in;
    uint64_t evict;
    uint64_t prefetch;
    uint64_t host_pin;
};
static_assert(sizeof(RatesPayload) == 48);
// A rate outside these bounds (bytes a second) is not a measurement.
inline constexpr uint64_t kMinRate = 10'000'000;
inline constexpr uint64_t kMaxRate = 10'000'000'000'000;

struct MemoryPayload {
    uint32_t gpu;  // client-local index
    // From a holder of the GPU whose new memory waits for room there: how
    // much more it needs than the GPU has free (MiB, rounded up); 0 else.
    uint32_t room_wanted_mib;
    uint64_t managed_bytes;  // pageable: may be evicted to host memory
    uint64_t pinned_bytes;   // never evicted: contexts, mapped and pool memory
};
static_assert(sizeof(MemoryPayload) == 24);

// The pinned memory (never evicted) that the other clients of one GPU report:
// what this client can never get there, whatever the schedule. Sent when it
// changes by at least kUnpageableStep, and on Hello when it is that much.
struct UnpageablePayload {
    uint32_t gpu;  // client-local index
    uint32_t reserved;
    uint64_t others_pinned_bytes;
};
static_assert(sizeof(UnpageablePayload) == 16);
inline constexpr uint64_t kUnpageableStep = uint64_t{1} << 20;

enum class ErrorCode : uint32_t {
    BadMagic = 1,
    BadVersion = 2,
    TooLarge = 3,
    BadType = 4,
    BadLength = 5,
    BadOrder = 6,  // e.g. Request before Hello, or a second Hello
    BadValue = 7,  // e.g. a GPU index the client never named
    Refused = 8,   // limits: too many clients, too many GPUs
};

// Followed by a message (UTF-8, not NUL-terminated) filling the payload.
struct ErrorFixed {
    uint32_t code;  // ErrorCode
    uint32_t reserved;
};

// The short name status documents use; the library words it for people.
inline const char* wait_reason_name(WaitReason r)
{
    switch (r) {
        case WaitReason::Oversubscribed:
            return "oversubscribed";
        case WaitReason::ModeOn:
            return "mode on";
        case WaitReason::Priority:
            return "priority";
        case WaitReason::Turns:
            return "turns";
    }
    return "queued";
}

inline const char* priority_name(Priority p)
{
    switch (p) {
        case Priority::Interactive:
            return "interactive";
        case Priority::Normal:
            return "normal";
        case Priority::Batch:
            return "batch";
        case Priority::Unset:
            break;
    }
    return "unset";
}

// The class as users spell it (NVSHARE_PRIORITY, nvshare.conf); Unset if not one.
inline Priority parse_priority(const char* s, size_t n)
{
    auto is = [&](const char* w) { return n == std::strlen(w) && std::memcmp(s, w, n) == 0; };
    if (is("interactive"))
        return Priority::Interactive;
    if (is("normal"))
        return Priority::Normal;
    if (is("batch"))
        return Priority::Batch;
    return Priority::Unset;
}

}  // namespace nvshare::proto
