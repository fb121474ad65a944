// The client thread's life: started once per process on the first gated call
// or allocation, never taking the application's signals, and gone in a fork
// child (which starts its own on first use).
#pragma once

namespace nvshare::preload::client_thread {

// Starts the client thread once; false if it cannot run (the caller then
// runs unscheduled).
bool ensure_started();

}  // namespace nvshare::preload::client_thread
