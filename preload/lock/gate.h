// The lock gate: every call that puts work on the GPU passes here first.
//
// One process-wide word, owned by the gate alone: only gate.h's inline fast
// path and gate.cpp touch it; the rest of the library calls the functions
// below. OPEN: the process may submit work (it holds the lock, or nvshared is
// unreachable and we fail open). ACTIVE: work was submitted since the client
// thread last cleared the bit (idle detection). The bits from
// kGateInFlightOne up count the calls admitted and still inside the driver: a
// call can take long to put its work on the GPU (a large graph, a batch of
// copies), and the release must wait for it, or that work would run after the
// lock is gone. While the lock is held and work flows, the gate is one atomic
// add on entry and one on leaving.
#pragma once

#include <atomic>
#include <cstdint>

namespace nvshare::preload {

inline constexpr uint32_t kGateOpen = 1;
inline constexpr uint32_t kGateActive = 2;
// BOUNDED: every call takes the slow path, which keeps the work queued on the
// GPU short (run_ahead.h) while a higher priority class may need the GPU.
inline constexpr uint32_t kGateBounded = 4;
inline constexpr uint32_t kGateStateMask = kGateOpen | kGateActive | kGateBounded;
inline constexpr uint32_t kGateInFlightOne = 1u << 8;

// The word itself: for the inline functions of this header only.
extern std::atomic<uint32_t> g_gate;

// The fast path: counts the caller in flight (until gate_leave()) and says
// whether it may go on at once (open and active). The count is taken in the
// same atomic step that reads the state, so a close either comes first (the
// caller waits, lock::wait_for_grant) or sees the count.
inline bool gate_try_enter()
{
    const uint32_t old = g_gate.fetch_add(kGateInFlightOne, std::memory_order_acq_rel);
    return (old & kGateStateMask) == (kGateOpen | kGateActive);
}

inline void gate_leave()
{
    g_gate.fetch_sub(kGateInFlightOne, std::memory_order_release);
}

// ---- the slow path (lock::wait_for_grant), the caller counted in flight ----

// Marks work submitted (ACTIVE, noting when a pause ended); true if open.
bool gate_mark_active();
// The current word, to wait on with gate_wait().
uint32_t gate_state();
// Counts the caller in flight if the gate is (still) open: true, admitted.
bool gate_count_if_open();
// Sleeps while the word still reads `seen`, at most timeout_ns.
void gate_wait(uint32_t seen, long timeout_ns);
// Work is pending from enter until leave, so the GPU is not idle even
// before the work runs: a call waits at the closed gate to be admitted (or
// fails open), or the program is inside an allocation, whose memory the work
// that follows uses (mapping it, or waiting for the library's lock while the
// client thread moves memory, takes milliseconds; a holder that let go then
// paid a switch each way).
void gate_pending_enter();
void gate_pending_leave();
// The same for a scope; with `marks_active`, it also marks the start and the
// end as work submitted (gate_mark_active), so that a pause is timed from
// where the allocation ended, not from before it began.
class PendingWork {
public:
    explicit PendingWork(bool marks_active) : marks_active_(marks_active)
    {
        gate_pending_enter();
        if (marks_active_)
            gate_mark_active();
    }
    ~PendingWork()
    {
        if (marks_active_)
            gate_mark_active();
        gate_pending_leave();
    }
    PendingWork(const PendingWork&) = delete;
    PendingWork& operator=(const PendingWork&) = delete;

private:
    bool marks_active_;
};
// Fails open and counts the caller in flight (no client thread, a stuck
// drain); counted in gate_fail_opens().
void gate_open_and_count();
// How many times callers failed open: a drain that saw this change let
// work through while it ran, so it has not drained that work.
uint32_t gate_fail_opens();
// The library is disabled in this process: open and active for good.
void gate_disable();

// ---- the client thread ----

bool gate_is_open();
// Work was submitted since clear_active(), or some is pending (a call still
// waits to be admitted: after a grant, its thread may not have run yet).
bool gate_active();
void gate_clear_active();
// Closes only if open, idle (ACTIVE clear, nothing pending) and nothing in
// flight: true if closed.
bool gate_close_if_idle();
// Whether some admitted call is still inside the driver.
bool gate_in_flight();
// After gate_close(): waits until no admitted call is still inside the
// driver, at most until `deadline` (CLOCK_MONOTONIC ns); false if some still
// were then.
bool gate_wait_in_flight(uint64_t deadline);
// Open (grant, fail-open) and wake every waiting thread.
void gate_open();
// Close; returns the previous state.
uint32_t gate_close();
// Sends every call through the slow path (true) or lets the fast path admit
// them again (false).
void gate_set_bounded(bool bounded);
bool gate_bounded();
// After fork in the child: closed, idle, nobody waiting.
void gate_reset();
// When work was first submitted after ACTIVE was last cleared (CLOCK_MONOTONIC
// ns): where a pause in the program's GPU work ended.
uint64_t gate_active_at();

}  // namespace nvshare::preload
