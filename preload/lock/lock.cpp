#include "preload/lock/lock.h"

#include <atomic>

#include "preload/env.h"
#include "preload/lock/admission.h"
#include "preload/lock/run_ahead.h"
#include "preload/lock/thread.h"
#include "preload/log.h"
#include "preload/mailbox.h"
#include "preload/memory/contexts.h"
#include "preload/memory/devices.h"
#include "preload/swap/swappable.h"

namespace nvshare::preload::lock {

namespace {

std::atomic<bool> g_warned_stuck{false};

}  // namespace

void wait_for_grant(CUstream stream)
{
    if (config().disabled) {
        gate_disable();
        return;
    }
    // Work captured into a graph does nothing now; it is gated when the graph
    // is launched. Never wait (or sync) inside a capture.
    if (contexts::stream_capturing(stream))
        return;
    if (gate_mark_active()) {
        if (gate_bounded())
            run_ahead::before_submit(stream);
        return;
    }
    gate_leave();  // a waiting call is not in flight
    // Never let work through unlocked, also without a current context: the
    // driver takes the context from an explicit stream. (Where it has none
    // at all the driver fails the call; waiting for the lock first is
    // harmless.)
    contexts::note_current_or_stream(stream);
    if (!client_thread::ensure_started()) {
        // No client thread: fail open. Nothing was ever swapped out; memory
        // made while the GPU was not ours gets it now (no copies, so any
        // thread may do it).
        // Only the client thread swaps out, so nothing is Out here and the
        // open cannot be refused; a refusal is waited out, never ignored.
        for (;;) {
            for (uint32_t i = 0; i < devices::count(); ++i)
                swappable::swap_in(i, UINT64_MAX, nullptr);
            if (open_gate_and_count())
                return;
            gate_wait(gate_state(), 200 * 1000 * 1000);
        }
    }
    // Counted as waiting until admitted: a holder must not let go as idle
    // while our thread has yet to run after the grant (on a loaded machine
    // that thread may run late; letting go then wastes a switch each way).
    const PendingWork waiting(false);
    for (;;) {
        const uint32_t v = gate_state();
        if (v & kGateOpen) {
            if (gate_count_if_open())
                return;
            continue;
        }
        mailbox::want_lock();
        // A drain that cannot finish (queued work waits for work we hold
        // back) must not hang the process: let the work through, once every
        // address it may touch is mapped (an allocation that waits for room
        // left its chunks without memory).
        if (mailbox::drain_overdue() && open_gate_and_count()) {
            if (!g_warned_stuck.exchange(true))
                log_warn(
                    "giving the GPU back takes longer than the grace period: GPU work "
                    "goes through unscheduled meanwhile");
            return;
        }
        // Woken by the client thread; the timeout bounds a lost wake-up and
        // the check above.
        gate_wait(v, 200 * 1000 * 1000);
    }
}

void start_client(int ready_timeout_ms)
{
    if (client_thread::ensure_started())
        mailbox::wait_ready(ready_timeout_ms);
}

}  // namespace nvshare::preload::lock
