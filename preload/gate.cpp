#include "preload/gate.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "preload/client.h"
#include "preload/clock.h"
#include "preload/contexts.h"
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
        g_gate.store(kGateOpen | kGateActive, std::memory_order_release);
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
    // No current context: the driver fails this call anyway.
    if (!contexts::note_current())
        return;
    if (!client::ensure_started()) {
        gate_open();  // no client thread: fail open
        return;
    }
    for (;;) {
        const uint32_t v = g_gate.load(std::memory_order_acquire);
        if (v & kGateOpen)
            return;
        client::want_lock();
        // A drain that cannot finish (queued work waits for work we hold
        // back) must not hang the process: let the work through.
        if (client::drain_overdue()) {
            if (!g_warned_stuck.exchange(true))
                log_warn(
                    "giving the GPU back takes longer than the grace period: GPU work "
                    "goes through unscheduled meanwhile");
            gate_open();
            return;
        }
        // Woken by the client thread; the timeout bounds a lost wake-up and
        // the check above.
        futex_wait(&g_gate, v, 200 * 1000 * 1000);
    }
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
