// Bounded run-ahead: while nvshared says a process of a higher priority
// class is registered on a GPU this process holds in turns (RunAhead), the
// process keeps only a few submissions queued on the GPU, so that when it is
// asked to let go its queued work has drained within a few kernels instead
// of running on for seconds. Each call that puts work on the GPU first
// records an event behind the work before it; when kQueued such events are
// outstanding, it waits for the oldest (at most kWaitLimitNs: never a hang).
// The client thread turns the bound on and off (gate_set_bounded, gate.h);
// calls then take the gate's slow path, which calls before_submit().
#pragma once

#include "preload/driver/cuda_api.h"

namespace nvshare::preload::run_ahead {

inline constexpr unsigned kQueued = 4;
inline constexpr long long kWaitLimitNs = 2'000'000'000;

// A call that puts work on `stream` (already resolved: CU_STREAM_PER_THREAD
// for the per-thread default stream) is about to go, the gate open and
// bounded. Never inside a capture; skips contexts other than the first it
// saw and anything the driver refuses.
void before_submit(CUstream stream);

}  // namespace nvshare::preload::run_ahead
