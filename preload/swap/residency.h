// Bulk migration of the process's memory when the lock changes hands: the
// swap engine's (swappable.h), and managed memory by the driver's migration.
// On a grant, its allocations are prefetched to the GPU (newest first) on a
// stream of the library's own while the program's work proceeds: a bulk
// prefetch runs about five times faster than the page faults that would
// otherwise pull the data in. Before a release on an oversubscribed GPU they
// are evicted to host memory the same way, so that the next holder never
// waits on lazy eviction. Client thread only.
#pragma once

#include <cstdint>

namespace nvshare::preload::residency {

// After a grant of `gpus` (client-local mask); `oversubscribed` and
// `exclusive` as the daemon said. The swap engine's memory is back when it
// returns; managed memory's prefetch runs on the GPU meanwhile. Allocations
// never migrated yet are always prefetched (unless NVSHARE_PREFETCH=0): bulk
// population beats populating them by page faults. True if data this
// library evicted is on its way back (busy() until it is).
bool on_grant(uint64_t gpus, bool oversubscribed, bool exclusive);

// The GPUs in `gpus` that this process holds are now taken in turns (a
// Contended notice said so after a shared grant): an allocation that finds
// one full no longer lets go for room but waits in host memory for it.
void now_exclusive(uint64_t gpus);

// Before Released: evicts to host memory when the policy says so and waits
// for it, at most until `deadline_ns` (CLOCK_MONOTONIC). The newest
// allocations, up to `keep_bytes` per GPU, stay: nvshared says how much fits
// beside the next holder, so only the excess moves (NVSHARE_EVICT=1 evicts
// everything), as switch_share_ns counts it. A next holder that grows
// afterwards asks for the rest (Shrink).
void before_release(uint64_t gpus, bool oversubscribed, uint64_t keep_bytes, uint64_t deadline_ns);

// Whether before_release on `gpus` would move the swap engine's memory
// alone (the program has no managed memory of its own there): then the lock
// can go before it moves, since the next holder's swap-in takes the room as
// it shows (engine copies out and in overlap, a switch costs about the
// longer of the two). Managed memory's eviction must end first: the driver
// would evict the next holder's pages to make room for ours.
bool swaps_out_after_release(uint64_t gpus, bool oversubscribed);

// Makes one step of the host memory a swap-out that keeps `keep_bytes` on
// each GPU will copy into, so that it runs at the bus's speed rather than at
// the speed of pinning host memory: for the oldest data first, which
// nvshared's Shrink rounds move first. True while more steps remain.
bool prestage(uint64_t gpus, uint64_t keep_bytes);
// The same, newest first (the order a release's swap-out copies in), while
// this process holds an oversubscribed GPU that others wait for: for a next
// holder taken to need as much room as we use (more than the switch itself
// moves where nvshared knows it smaller), so that the room a starting next
// holder asks for later moves at the bus's speed.
bool prestage_for_switch(uint64_t gpus, uint64_t keep_bytes);
// The same, oldest first, for the oldest `bytes` of what the process has on
// each GPU: one that waits its turn on an oversubscribed GPU can then give
// that much room at the bus's speed when a holder grows (nvshared's Shrink).
bool prestage_ahead(uint64_t gpus, uint64_t bytes);

// Whether `bytes` more of our memory would fit GPU `i` once the memory of
// others that can move has left: the capacity less what this process and
// others' unpageable memory take. False after an await_room that found no
// room came, until the next grant.
bool room_will_come(uint32_t i, uint64_t bytes);
// While the process holds `gpus` alone: the swap engine's memory there gets
// device memory as the room shows (others shrink), waiting as at a grant;
// what still finds none goes to host memory. Client thread, the program's
// work drained and held back.
void await_room(uint64_t gpus);

// How much more GPU `i` would need to have free (beside the driver's
// reserve) for all of the swap engine's memory there that is not on it
// (new chunks waiting for room, chunks in host memory): 0 if it fits. Asks
// the driver, which counts what no report does (contexts, its own memory).
uint64_t room_short(uint32_t i);

// Bytes of the swap engine's memory in host memory while the process holds
// its GPU (the device had no room), on the GPU where that is most.
uint64_t stranded();
// Whether the device has room now for some of that (asks the driver).
bool room_for_stranded();
// Moves what it can of that memory to the device (client thread, with the
// program's work drained and held back).
void promote();

// Scheduling failed open: the program's work runs unscheduled from now on,
// so every swappable chunk gets memory (client thread).
void fail_open();

// Prefetches in flight whose completion must be noticed (poll soon).
bool busy();
// Notices completed prefetches; true if some GPU's statistics changed.
bool poll();

struct Stats {
    uint64_t bytes_prefetched = 0;
    uint64_t bytes_evicted = 0;
    uint64_t swap_ins = 0;
    uint64_t swap_in_ns = 0;
    uint64_t swap_outs = 0;
    uint64_t swap_out_ns = 0;
    bool dirty = false;  // changed since the client last reported
};
Stats& stats(uint32_t gpu);

// Our share of what letting go now would cost (swap::switch_share_ns, the
// rule): moving out what exceeds `keep_bytes` and bringing it back later, at
// the rates this process's latest moves reached; until it measured one, the
// rate earlier processes measured on the GPU (set_known_rates), and where
// none did, the assumed rate (tuning.h). 0 where nothing would be evicted.
// *pinning_ns, if given: the part of it that makes host memory not made
// ahead yet.
uint64_t switch_share_ns(bool oversubscribed, uint64_t keep_bytes, uint64_t* pinning_ns = nullptr);

// How long making the host memory that prestage_for_switch(keep_bytes) still
// lacks would take, at the host's pinning rate (as switch_share_ns counts it).
uint64_t switch_making_ns(uint64_t keep_bytes);

// Bytes a second at which memory moves on a GPU (0: not known): the swap
// engine's copies out and in, the driver's migration out and in, and the
// making of pinned host memory (the host's).
struct Rates {
    double engine_out = 0;
    double engine_in = 0;
    double evict = 0;
    double prefetch = 0;
    double host_pin = 0;
};
// What nvshared says earlier processes measured on GPU `gpu` (client thread).
void set_known_rates(uint32_t gpu, const Rates& r);
// A count that changes whenever one of measured_rates(gpu)'s figures does.
uint64_t rates_version(uint32_t gpu);
// What this process measured on GPU `gpu`, each figure the better of its
// last two moves (0 before the second).
Rates measured_rates(uint32_t gpu);

void reset_after_fork();

}  // namespace nvshare::preload::residency
