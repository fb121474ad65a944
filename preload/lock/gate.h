// The lock gate: every call that puts work on the GPU passes here first.
//
// One process-wide word. OPEN: the process may submit work (it holds the
// lock, or nvshared is unreachable and we fail open). ACTIVE: work was
// submitted since the client thread last cleared the bit (idle detection).
// The bits from kGateInFlightOne up count the calls admitted and still
// inside the driver: a call can take long to put its work on the GPU (a
// large graph, a batch of copies), and the release must wait for it, or
// that work would run after the lock is gone. While the lock is held and
// work flows, the gate is one atomic add on entry and one on leaving.
#pragma once

#include <atomic>
#include <cstdint>

#include "preload/driver/cuda_api.h"

namespace nvshare::preload {

inline constexpr uint32_t kGateOpen = 1;
inline constexpr uint32_t kGateActive = 2;
inline constexpr uint32_t kGateStateMask = kGateOpen | kGateActive;
inline constexpr uint32_t kGateInFlightOne = 1u << 8;

extern std::atomic<uint32_t> g_gate;

// Entered with the caller counted in flight; returns with it counted and
// admitted.
void gate_slow(CUstream stream);

// Admits a call that puts work on `stream`; it counts as in flight until
// gate_leave(). The count is taken in the same atomic step that reads the
// state, so a close either comes first (the call waits) or sees the count.
inline void gate_enter(CUstream stream, int per_thread)
{
    const uint32_t old = g_gate.fetch_add(kGateInFlightOne, std::memory_order_acq_rel);
    if (__builtin_expect((old & kGateStateMask) == (kGateOpen | kGateActive), 1))
        return;
    gate_slow(per_thread != 0 && stream == nullptr ? CU_STREAM_PER_THREAD : stream);
}

inline void gate_leave()
{
    g_gate.fetch_sub(kGateInFlightOne, std::memory_order_release);
}

// Client thread, after gate_close(): waits until no admitted call is still
// inside the driver, at most until `deadline` (CLOCK_MONOTONIC ns); false if
// some still were then.
bool gate_wait_in_flight(uint64_t deadline);

// Client thread: open (grant, fail-open) and wake every waiting thread.
void gate_open();
// Client thread: close; returns the previous state.
uint32_t gate_close();
// After fork in the child: closed, idle, nobody waiting.
void gate_reset();
// When work was first submitted after ACTIVE was last cleared (CLOCK_MONOTONIC
// ns): where a pause in the program's GPU work ended.
uint64_t gate_active_at();

}  // namespace nvshare::preload
