// What the scheduler asks of its clients: the server sends each Action to
// the client it names.
#pragma once

#include <cstdint>

#include "daemon/client.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

// What a client's libnvshare.so moved for one GPU (cumulative).
enum class ActionKind {
    Grant,       // client now holds `gpus`
    Drop,        // client must release `gpus` within the grace period
    Revoke,      // client's hold on `gpus` was taken away
    Contended,   // somebody waits for GPUs the client holds exclusively
    Unpageable,  // others' pinned memory on the GPU in `gpus` changed
    Waiting,     // why the client waits for the GPU in `gpus` changed
    RunAhead,    // whether a holder must keep its queued work short changed
    Shrink,      // a client that does not hold `gpus` must leave at most `keep` there
};

enum class RevokeReason { GraceExpired, Admin };

struct Action {
    ActionKind kind;
    ClientId client;
    GpuSet gpus;
    bool exclusive = false;       // Grant: no other client runs on these GPUs
    bool oversubscribed = false;  // reported memory exceeds capacity on one of `gpus`
    bool contended = false;       // Grant: somebody already waits for them
    Duration grace{};             // Drop
    // Drop, Contended, a contended Grant, on an oversubscribed GPU: managed
    // bytes the client may leave on `gpus` when it lets go (UINT64_MAX:
    // everything). Shrink: what it may leave there now.
    uint64_t keep = UINT64_MAX;
    uint64_t others_pinned = 0;  // Unpageable
    bool turns_begin = false;    // Drop: the GPU has just begun to be taken in turns
    RevokeReason revoke_reason = RevokeReason::GraceExpired;  // Revoke
    WaitFacts wait{};                                         // Waiting
    bool bounded = false;                                     // RunAhead, Grant
};

}  // namespace nvshare::daemon
