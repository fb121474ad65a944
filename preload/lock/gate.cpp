#include "preload/lock/gate.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "preload/lock/client.h"
#include "preload/clock.h"
#include "preload/memory/contexts.h"
#include "preload/env.h"
#include "preload/log.h"

namespace nvshare::preload {

std::atomic<uint32_t> g_gate{0};
std::atomic<uint64_t> g_active_at{0};

namespace {

std::atomic<bool> g_warned_stuck{false};

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns)
{
    timespec ts{0, timeout_ns};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, &ts,
            nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word)
{
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
}

}  // namespace

void gate_slow(CUstream stream)
{
    if (config().disabled) {
        g_gate.fetch_or(kGateOpen | kGateActive, std::memory_order_acq_rel);
        return;
    }
    // Work captured into a graph does nothing now; it is gated when the graph
    // is launched. Never wait (or sync) inside a capture.
    if (contexts::stream_capturing(stream))
        return;
    const uint32_t old = g_gate.fetch_or(kGateActive, std::memory_order_acq_rel);
    if ((old & kGateActive) == 0)
        g_active_at.store(now_ns(), std::memory_order_release);
    if (old & kGateOpen)
        return;
    gate_leave();  // a waiting call is not in flight
    // Never let work through unlocked, also without a current context: the
    // driver takes the context from an explicit stream. (Where it has none
    // at all the driver fails the call; waiting for the lock first is
    // harmless.)
    contexts::note_current_or_stream(stream);
    if (!client::ensure_started()) {
        gate_open();  // no client thread: fail open
        g_gate.fetch_add(kGateInFlightOne, std::memory_order_acq_rel);
        return;
    }
    for (;;) {
        const uint32_t v = g_gate.load(std::memory_order_acquire);
        if (v & kGateOpen) {
            // Counted only if still open when counted: a close in between
            // would not wait for us.
            if (g_gate.fetch_add(kGateInFlightOne, std::memory_order_acq_rel) & kGateOpen)
                return;
            gate_leave();
            continue;
        }
        client::want_lock();
        // A drain that cannot finish (queued work waits for work we hold
        // back) must not hang the process: let the work through.
        if (client::drain_overdue()) {
            if (!g_warned_stuck.exchange(true))
                log_warn(
                    "giving the GPU back takes longer than the grace period: GPU work "
                    "goes through unscheduled meanwhile");
            gate_open();
            g_gate.fetch_add(kGateInFlightOne, std::memory_order_acq_rel);
            return;
        }
        // Woken by the client thread; the timeout bounds a lost wake-up and
        // the check above.
        futex_wait(&g_gate, v, 200 * 1000 * 1000);
    }
}

bool gate_wait_in_flight(uint64_t deadline)
{
    // Calls usually leave the driver within microseconds; poll briefly.
    while (g_gate.load(std::memory_order_acquire) >= kGateInFlightOne) {
        if (now_ns() >= deadline)
            return false;
        timespec ts{0, 200 * 1000};
        nanosleep(&ts, nullptr);
    }
    return true;
}

void gate_open()
{
    g_gate.fetch_or(kGateOpen, std::memory_order_acq_rel);
    futex_wake_all(&g_gate);
}

uint32_t gate_close()
{
    return g_gate.fetch_and(~kGateOpen, std::memory_order_acq_rel);
}

void gate_reset()
{
    g_gate.store(0, std::memory_order_release);
}

uint64_t gate_active_at()
{
    return g_active_at.load(std::memory_order_acquire);
}

}  // namespace nvshare::preload
