// What the hooks call to take part in the GPU lock: enter()/leave() around
// every call that puts work on the GPU, and start_client() before the first
// allocation. The client thread behind it (client.h) is never called by the
// hooks directly.
#pragma once

#include "preload/driver/cuda_api.h"
#include "preload/lock/gate.h"

namespace nvshare::preload::lock {

// The gate is closed (or not yet active): asks for the lock and waits for
// the grant, failing open where nvshared cannot be reached or a drain is
// stuck. Entered with the caller counted in flight; returns with it counted
// and admitted.
void wait_for_grant(CUstream stream);

// Admits a call that puts work on `stream`; it counts as in flight until
// leave(). The fast path is one atomic add.
inline void enter(CUstream stream, int per_thread)
{
    if (__builtin_expect(gate_try_enter(), 1))
        return;
    wait_for_grant(per_thread != 0 && stream == nullptr ? CU_STREAM_PER_THREAD : stream);
}

inline void leave()
{
    gate_leave();
}

// Starts the client thread (once) and waits at most ready_timeout_ms for
// nvshared's settings, so that a first allocation knows the GPU's capacity.
void start_client(int ready_timeout_ms);

}  // namespace nvshare::preload::lock
