// The CUDA contexts this process created or retained (all of them are drained
// when the lock is given back) and the stream captures in progress.
#pragma once

#include "preload/cuda_api.h"

namespace nvshare::preload::contexts {

// Registers the calling thread's current context and its device (for
// contexts made before we could see them). False if there is none.
bool note_current();

// The device of the calling thread's current context, or -1.
int current_device();

// Waits for all work of every known context (client thread only). Returns
// false if a stream capture is in progress, when synchronising would
// invalidate it: the caller tries again later.
bool drain_all();

// Stream captures in progress in this process.
int active_captures();

// Whether `stream` is being captured (only asks the driver while some
// capture is in progress).
bool stream_capturing(CUstream stream);

void reset_after_fork();

}  // namespace nvshare::preload::contexts
