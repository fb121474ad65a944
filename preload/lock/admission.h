// The one place that opens the gate. The invariant it enforces
// (preload/README.md): while the gate is open, every chunk of this process's
// swappable memory has memory mapped at its address, on the device or in host
// memory, so that no GPU work the gate lets through reaches an unmapped
// address (on a GPU: CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the process).
// The check and the open run under the swap engine's lock
// (swappable::open_if_mapped), so an allocation that leaves chunks without
// memory either comes first (its chunks get memory here) or closes the gate
// after this opens it, and a move the client thread has begun
// (swappable::hold_moves, after ClientLoop::quiesce) makes it refuse.
// gate_disable() (the library disabled in this process: no swappable memory
// is ever made) is the only other way the gate opens.
#pragma once

namespace nvshare::preload::lock {

// Opens the gate and wakes every waiting thread, once every chunk has
// memory: chunks made while the process could not place them (Absent) get it
// now, on the device where it has room, else in host memory, with no copy.
// False, the gate left as it was, if some chunk's data is swapped out (only a
// swap-in brings it back), no memory could be had for a chunk, or the client
// thread is moving memory.
bool open_gate();
// The same, also counting the caller in flight (a thread that fails open:
// no client thread, a stuck drain); false: not admitted, not counted.
bool open_gate_and_count();

}  // namespace nvshare::preload::lock
