// Pinned host memory for the swap engine's swapped-out chunks: anonymous
// memory with huge pages, faulted in by several threads at once and then
// registered with the driver (cuMemHostRegister): faster to make than
// cuMemCreate of host memory, which pins page by page in one thread, and
// copies into it run at the bus's speed (bench/README.md, driver_probes.py
// pinways, register). Not inherited by fork() children
// (MADV_DONTFORK): a private mapping of pinned pages would be copied.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvshare::preload::host_memory {

// Makes sizes[i] bytes for each of `count` regions: out[i] is the region, or
// nullptr where there was none to make (no memory, the driver refused, or
// the host has too little left: host_budget.h).
// Returns the bytes made. Any thread, with a context current; the memory is
// pinned for every context (CU_MEMHOSTREGISTER_PORTABLE).
uint64_t make(const uint64_t* sizes, void** out, size_t count);

// Bytes a second at which make() made host memory, faulting it in and
// registering it: the better of its last two samples (makes summed to 1 GiB
// or more, swap_plan::RateEstimate), `assumed` standing in for those it
// does not have yet.
double pin_rate(double assumed);
// Samples pin_rate() has taken so far: it changes with each.
uint64_t pin_rate_samples();

// In a fork()ed child: the rate's lock, which a thread of the parent may
// have held, is free.
void reset_after_fork();

// Whether the host runs low on memory (host_budget::low).
bool host_low();

// Whether `bytes` more may be pinned now (host_budget::pinnable): what the
// swap engine pins by other means (host-located VMM memory for chunks that
// find no room on the GPU) stays within the same budget.
bool may_pin(uint64_t bytes);

// Bytes that make() refused since the last call because the host had too
// little memory left.
uint64_t take_refused();

// Gives back a region that make() returned (`bytes` as asked).
void release(void* region, uint64_t bytes);

// What make() did since the last call, as the debug log says it: bytes
// made, and the time spent faulting them in and registering them.
struct Made {
    char text[96];
};
Made take_made();

}  // namespace nvshare::preload::host_memory
