// The CUDA contexts this process created or retained (all of them are drained
// when the lock is given back) and the stream captures in progress.
#pragma once

#include "preload/driver/cuda_api.h"

namespace nvshare::preload::contexts {

// Registers the calling thread's current context and its device (for
// contexts made before we could see them). False if there is none.
bool note_current();

// Like note_current(); with no current context, registers the context of
// `stream` instead (the driver takes the context from an explicit stream, so
// such a call does reach the GPU). False if neither is known.
bool note_current_or_stream(CUstream stream);

// The device of the calling thread's current context, or -1.
int current_device();
// The device of context `ctx`, or -1.
int device_of(CUcontext ctx);

// Waits for all work of every known context (the client thread's drain).
// Returns false if a stream capture is in progress, when synchronising would
// invalidate it: the caller tries again later.
bool drain_all();
// The same from any thread; `failed` (if given) gets the error that
// synchronising the caller's current context returned (a sticky error of
// the program's own work there; another context's error is that
// context's, as the driver reports it).
bool sync_all(CUresult* failed);

// Stream captures in progress in this process.
int active_captures();

// Puts the calling thread in relaxed capture mode, once: the library's own
// work must never make another thread's global-mode capture illegal.
void relax_capture_mode();

// Runs fn(arg) with a context of GPU `ordinal` current on the calling thread
// (client thread only); false if the process has no context there.
bool with_device_context(CUdevice ordinal, void (*fn)(void*), void* arg);

// Whether `stream` is being captured (only asks the driver while some
// capture is in progress).
bool stream_capturing(CUstream stream);

// Errors after which a context runs no more work (sticky: an illegal
// address, a failed launch, ...).
bool is_sticky(CUresult e);
// The sticky error of the calling thread's current context, or
// CUDA_SUCCESS. The driver's VMM calls (cuMemAddressReserve, cuMemCreate,
// cuMemMap, cuMemSetAccess) do not report one, where cuMemAlloc does
// (gpu suite: fault-then-alloc): an allocation the library
// makes of VMM memory asks here first, one query (cuCtxGetLimit), no wait.
CUresult lost_error();

void reset_after_fork();

}  // namespace nvshare::preload::contexts
