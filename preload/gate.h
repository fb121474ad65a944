// The lock gate: every call that puts work on the GPU passes here first.
//
// One process-wide word. OPEN: the process may submit work (it holds the
// lock, or nvshared is unreachable and we fail open). ACTIVE: work was
// submitted since the client thread last cleared the bit (idle detection).
// While the lock is held and work flows, the gate is one atomic load.
#pragma once

#include <atomic>
#include <cstdint>

#include "preload/cuda_api.h"

namespace nvshare::preload {

inline constexpr uint32_t kGateOpen = 1;
inline constexpr uint32_t kGateActive = 2;

extern std::atomic<uint32_t> g_gate;

void gate_slow(CUstream stream);

inline void gate_enter(CUstream stream, int per_thread)
{
    if (__builtin_expect(g_gate.load(std::memory_order_acquire) == (kGateOpen | kGateActive), 1))
        return;
    gate_slow(per_thread != 0 && stream == nullptr ? CU_STREAM_PER_THREAD : stream);
}

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
