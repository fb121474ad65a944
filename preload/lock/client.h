// The connection to nvshared: one thread per process, started on the first
// gated call or allocation, that registers the process's GPUs, asks for and
// gives back the lock, and reports memory. It fails open: without a daemon
// the process runs unscheduled and reconnects when the daemon is back.
#pragma once

namespace nvshare::preload::client {

// Starts the client thread once; false if it cannot run (the caller then
// runs unscheduled).
bool ensure_started();

// An application thread waits at the closed gate: ask for the lock.
void want_lock();

// The client thread has been draining for longer than the grace allows:
// GPU work it waits for is probably held back at our own gate.
bool drain_overdue();

// Something changed (memory, GPUs): wake the client thread.
void poke();

// Waits until nvshared's settings arrived or we failed open, at most
// timeout_ms.
void wait_ready(int timeout_ms);

}  // namespace nvshare::preload::client
