// When the swap engine moves memory around a switch of the GPU lock: the
// host memory it makes ahead of a swap-out (prestaging), when memory that
// found no room on the device is looked at again (promotion), when an
// allocation waiting for room asks for it, and how long an idle holder whose
// memory found no room stays before it lets go. Pure logic, in the style of
// lock/holding.h: events and the facts of the moment in, the step to take
// and the next wake-up out, on a clock the caller passes (nanoseconds). The
// client thread (lock/client.cpp) feeds it and carries out its steps.
#pragma once

#include <cstdint>

namespace nvshare::preload::swap {

// Where the process stands with the lock, as far as moving memory goes.
enum class Hold {
    None,     // not granted (idle or waiting)
    Moving,   // granted, but the gate is closed for a swap-in or a drop
    Running,  // granted, the gate open
};

// What the client thread knows at a turn of its loop.
struct Facts {
    uint64_t now = 0;
    Hold hold = Hold::None;
    bool contended = false;       // others wait for what we hold
    bool oversubscribed = false;  // nvshared's latest word on our GPUs
    bool host_low = false;        // the host runs low on memory
    uint64_t stranded = 0;        // bytes of ours in host memory while we hold
    bool captures = false;        // a stream capture runs
    // Holding contended: whether a swap-out of ours is to be expected soon
    // (a pause of ours outlasted our share of a switch with its host memory
    // made, or our quantum ends within twice the time making it takes and
    // tuning::kQuantumLeadNs), and when it will be without an event (the
    // quantum's; UINT64_MAX: never). Like host_low, read by prestage() only,
    // after prestage_pending(): it costs a look at every chunk.
    bool switch_likely = true;
    uint64_t switch_likely_at = UINT64_MAX;
};

// Which host memory to make ahead, one step at a time.
enum class Prestage {
    None,
    ForSwitch,  // while holding contended, a switch likely: for our next swap-out
    ToKeep,     // after a Shrink: down to `bytes` left on the GPU
    Ahead,      // while waiting on an oversubscribed GPU: the last `bytes`
};

struct PrestageStep {
    Prestage kind = Prestage::None;
    uint64_t bytes = 0;
};

class SwitchPolicy {
public:
    // ---- events ----
    // Granted: the grant's swap-in brings our memory, and the next switch's
    // host memory may be made.
    void granted();
    // A Shrink was carried out: at most `keep_bytes` of ours stay on the
    // GPUs we do not hold; the holder may grow on.
    void shrunk(uint64_t keep_bytes);
    // A Waiting notice says the GPU we wait for is oversubscribed.
    void waits_oversubscribed();
    // A Contended notice: what may stay when we let go has changed.
    void contended();
    // Our memory changed, and nvshared was told.
    void memory_changed(uint64_t now);
    uint64_t memory_changed_at() const { return memory_changed_at_; }
    // An allocation waits for room others give back.
    void room_wanted() { room_wanted_ = true; }

    // ---- steps, each asked with the facts of the moment ----
    // Once a turn of the client's loop, first: notes how long memory of ours
    // has found no room on the device.
    void observe(const Facts& f);

    // Whether to ask for room now (report our size, drain, take the room as
    // it shows); then room_tried().
    bool room_due(const Facts& f) const;
    // `done`: the room was taken; else (our work could not be drained) it
    // is tried again later.
    void room_tried(bool done, uint64_t now);

    // How long an idle holder stays idle before it lets go, given what its
    // pauses say (`gaps_hold`, lock/idle_gaps.h) and the idle period: memory
    // that found no room on the device for long makes it let go at the
    // period, so that the other holder leaves room.
    uint64_t idle_hold(const Facts& f, uint64_t gaps_hold, uint64_t period) const;

    // Whether prestage() may have a step now: the caller then reads the
    // host's memory (Facts::host_low, not read before: it costs a read of
    // /proc/meminfo) and asks for it.
    bool prestage_pending(const Facts& f) const;
    // The next step of host memory to make ahead; then prestaged().
    PrestageStep prestage(const Facts& f);
    // `more`: steps remain.
    void prestaged(bool more) { prestaging_ = more; }

    // Whether to look now for device room for memory that found none (then
    // drain and promote); the next look comes tuning::kPromotePollNs later.
    bool promote_due(const Facts& f);

    // The earliest time one of the steps above may become due (UINT64_MAX:
    // none without an event).
    uint64_t next_wake(const Facts& f) const;

private:
    bool holds_contended(const Facts& f) const;
    uint64_t prestage_at() const;

    // Host memory may still be made ahead: set by events that change what
    // a swap-out will move, cleared when the engine says no step remains.
    bool prestaging_ = false;
    // Holding contended with no switch likely yet: when to look again.
    uint64_t next_likely_look_ = 0;
    // The latest Shrink's keep while we do not hold the GPU (UINT64_MAX: none).
    uint64_t shrink_keep_ = UINT64_MAX;
    bool waits_oversubscribed_ = false;  // since our latest grant
    uint64_t memory_changed_at_ = 0;
    uint64_t next_promote_check_ = 0;
    bool room_wanted_ = false;
    uint64_t next_room_try_ = 0;
    uint64_t stranded_since_ = 0;  // memory of ours found no room on the device (0: none)
};

}  // namespace nvshare::preload::swap
