#include "preload/lock/gate.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "preload/clock.h"

namespace nvshare::preload {

std::atomic<uint32_t> g_gate{0};

namespace {

std::atomic<uint64_t> g_active_at{0};
std::atomic<uint32_t> g_pending{0};
std::atomic<uint32_t> g_fail_opens{0};

void futex_wake_all(std::atomic<uint32_t>* word)
{
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
}

}  // namespace

bool gate_mark_active()
{
    const uint32_t old = g_gate.fetch_or(kGateActive, std::memory_order_acq_rel);
    if ((old & kGateActive) == 0)
        g_active_at.store(now_ns(), std::memory_order_release);
    return (old & kGateOpen) != 0;
}

uint32_t gate_state()
{
    return g_gate.load(std::memory_order_acquire);
}

bool gate_count_if_open()
{
    // Counted only if still open when counted: a close in between would not
    // wait for us.
    if (g_gate.fetch_add(kGateInFlightOne, std::memory_order_acq_rel) & kGateOpen)
        return true;
    gate_leave();
    return false;
}

void gate_wait(uint32_t seen, long timeout_ns)
{
    timespec ts{0, timeout_ns};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_gate), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr,
            0);
}

void gate_open_and_count()
{
    g_fail_opens.fetch_add(1, std::memory_order_acq_rel);
    gate_open();
    g_gate.fetch_add(kGateInFlightOne, std::memory_order_acq_rel);
}

uint32_t gate_fail_opens()
{
    return g_fail_opens.load(std::memory_order_acquire);
}

void gate_disable()
{
    g_gate.fetch_or(kGateOpen | kGateActive, std::memory_order_acq_rel);
}

bool gate_is_open()
{
    return (g_gate.load(std::memory_order_acquire) & kGateOpen) != 0;
}

void gate_pending_enter()
{
    g_pending.fetch_add(1, std::memory_order_acq_rel);
}

void gate_pending_leave()
{
    g_pending.fetch_sub(1, std::memory_order_acq_rel);
}

bool gate_active()
{
    return (g_gate.load(std::memory_order_acquire) & kGateActive) != 0 ||
           g_pending.load(std::memory_order_acquire) != 0;
}

void gate_clear_active()
{
    g_gate.fetch_and(~kGateActive, std::memory_order_acq_rel);
}

bool gate_close_if_idle()
{
    // Open, not active, nothing in flight (bounded or not: closing ends the
    // hold, and its bound with it).
    uint32_t expected = g_gate.load(std::memory_order_acquire);
    if ((expected & ~kGateBounded) != kGateOpen || g_pending.load(std::memory_order_acquire) != 0)
        return false;
    return g_gate.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

void gate_set_bounded(bool bounded)
{
    if (bounded)
        g_gate.fetch_or(kGateBounded, std::memory_order_acq_rel);
    else
        g_gate.fetch_and(~kGateBounded, std::memory_order_acq_rel);
}

bool gate_bounded()
{
    return (g_gate.load(std::memory_order_acquire) & kGateBounded) != 0;
}

bool gate_in_flight()
{
    return g_gate.load(std::memory_order_acquire) >= kGateInFlightOne;
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
    g_pending.store(0, std::memory_order_release);
}

uint64_t gate_active_at()
{
    return g_active_at.load(std::memory_order_acquire);
}

}  // namespace nvshare::preload
