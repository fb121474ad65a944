// The swap engine: device allocations (cuMemAlloc) backed by VMM memory that
// the library moves itself, at the speed of the bus, when the lock changes
// hands on an oversubscribed GPU.
//
// Each allocation is one address reservation for its whole life (pointers
// never change), cut into chunks of at most 64 MiB (swap_plan.h). A chunk is
// in one of four places:
//   Device  a device chunk is mapped at its address;
//   Out     swapped out: its data is in its host memory (host_memory.h,
//           pinned), and nothing is mapped at its address: the program's
//           work waits at the gate until the next grant brings it back;
//   Host    the device had no room while the process held the GPU: a
//           host-located VMM chunk (pinned host memory) is mapped at its
//           address, so GPU work that reaches it runs correctly, over the
//           bus, until it moves to the device;
//   Absent  made while the process did not hold the GPU: only the address
//           exists; it gets memory when the process is granted the GPU.
// A chunk's host memory, once made, stays as its place for later swap-outs:
// making it costs far more than copying into it. The same holds for the
// VMM chunk of a Host chunk (also mapped at a second, staging address,
// where the copies go).
//
// Thread safety: one mutex; the client thread holds it for a whole swap, the
// allocation hooks for an allocation or a free.
#pragma once

#include <cstdint>

#include "preload/driver/cuda_api.h"

namespace nvshare::preload::swappable {

// What an allocation left without memory (Absent chunks), for the caller
// to wait out before the pointer is returned (the invariant,
// preload/README.md: no allocation returns unmapped memory).
enum class Unmapped {
    None,        // every chunk has memory
    UntilGrant,  // the process does not hold the GPU: all of it, until a grant
    // The device is full while the process holds the GPU shared with
    // others (set_shared_hold): the part that found no room, until a grant
    // with room (the caller lets go).
    UntilSharedGrant,
    // The device is full while the process holds it alone and others'
    // memory that can move takes the room (`wait_for_room`,
    // residency::room_will_come): the part that found no room, until others
    // give it back (residency::await_room).
    UntilRoom,
};

// Allocates `bytes` on GPU `gpu` (devices:: index) at a new address. While
// the process holds the GPU the memory is made at once, on the device or,
// where that is full, in host memory (CUDA_ERROR_OUT_OF_MEMORY if neither
// has room) unless it may wait (`unmapped`); otherwise it is Absent until the
// next grant. Errors: the driver's.
// `reserved`: what it takes on the GPU (a multiple of the granularity).
CUresult allocate(CUdeviceptr* dptr, uint64_t bytes, uint32_t gpu, uint64_t* reserved,
                  Unmapped* unmapped, bool wait_for_room = false);

// Allocates `bytes` (less than the granularity) on GPU `gpu` as a block of
// a slab (small_blocks.h): a swappable allocation of swap_plan::small_slab
// bytes that moves as any other, made where no slab of the GPU has room
// (as allocate() makes memory, `wait_for_room` for it). Blocks start at a
// multiple of small_blocks::kAlign. `unmapped`: what the caller waits out,
// as for allocate(); a block of a slab that is mapped needs nothing. The
// slab's memory is counted as the process's on the GPU (devices::add_usage)
// while the slab lives, not the block's: that is what the GPU holds. Errors:
// the driver's, or CUDA_ERROR_OUT_OF_MEMORY.
CUresult allocate_small(CUdeviceptr* dptr, uint64_t bytes, uint32_t gpu, Unmapped* unmapped,
                        bool wait_for_room = false);

// The process holds GPU `gpu` together with others and the GPU is not
// oversubscribed (residency::on_grant): an allocation that finds the device
// full waits for the next grant (see allocate) rather than pinning host
// memory, since the others' memory may be what fills it.
void set_shared_hold(uint32_t gpu, bool shared);

// Frees the swappable allocation or small block that starts at `ptr`; false
// if there is none (nothing done). The caller has waited for the work that
// may use it; with `later` (a stream capture runs, so it could not) the
// memory stays mapped, and a block taken, until finish_frees() after such a
// wait. A block's slab, still used by other blocks, stays mapped; the slab
// goes (as an allocation freed) once none of its blocks is used and another
// empty slab of the GPU is kept.
bool free_allocation(CUdeviceptr ptr, bool later = false);
// Allocations freed with `later`, not yet unmapped: a caller that is about
// to wait for all of the process's GPU work reads this first, then passes it
// to finish_frees() once the wait has ended.
size_t deferred_frees();
void finish_frees(size_t count);

// What the driver says of cuMemAlloc memory, for the swappable allocation
// or small block that `ptr` points into, from what the engine knows (its chunks may be
// swapped out, and each mapping is a buffer of its own to the driver): its
// start and size, one buffer ID for its life (kBufferIdBase + a counter:
// far above the driver's own counter), its GPU's CUDA ordinal and the
// context current when it was made. False if `ptr` is not in one.
inline constexpr uint64_t kBufferIdBase = 1ull << 62;
struct Described {
    CUdeviceptr start;
    uint64_t bytes;
    uint64_t buffer_id;
    CUdevice ordinal;
    CUcontext context;
};
bool describe(CUdeviceptr ptr, Described* out);

// True if `ptr` lies in a chunk with nothing mapped at its address (Absent,
// Out): the driver knows the address only as a reservation until the next
// grant.
bool absent_at(CUdeviceptr ptr);

// The check behind lock::open_gate, the one place that opens the gate (the
// invariant, preload/README.md). Under the engine's lock: every Absent chunk
// (no data yet) gets memory now, on the device where it has room, else in
// host memory (no copy: any thread may do it); then, only if no chunk of any
// GPU is Out (its data comes back only by a swap-in) or left without memory,
// and no move is under way (hold_moves), `open` runs (it opens the gate)
// before the lock is dropped: no allocation that leaves chunks without memory
// and no swap-out can come between the check and the open. False, `open` not
// run, otherwise; a chunk for which neither place has memory is named in a
// warning.
bool open_if_mapped(void (*open)());
// The client thread has drained the program's work and is about to move
// memory (ClientLoop::quiesce): from now until release_moves(), open_if_mapped
// refuses, so that a thread that saw a stuck drain cannot let work through
// onto memory being copied or unmapped.
void hold_moves();
void release_moves();

// Peer access (cuCtxEnablePeerAccess from a context of GPU `peer`, a CUDA
// ordinal, to one of GPU `gpu`): with `enabled`, `peer` may reach this
// process's swappable memory of `gpu` from now on, as it may reach memory
// of `gpu` from cuMemAlloc natively: the chunks mapped now get access for it
// at once, and every chunk mapped later (a swap-in, a placement) gets it with
// the GPU's own. Counted per pair: access goes (PROT_NONE on what is mapped,
// none at later mappings) with as many disables as enables. False if the
// driver refused access to some mapped chunk (enabling: the pair is then
// not counted; disabling: access stays where it could not be taken away).
bool set_peer(uint32_t gpu, CUdevice peer, bool enabled);

struct Moved {
    uint64_t bytes = 0;          // copied
    uint64_t ns = 0;             // the whole move, remapping included
    bool short_of_room = false;  // swap-in: the device refused memory within the budget
    uint64_t left_on_host = 0;   // swap-in: bytes that stay in host memory
    uint64_t out_to_host = 0;    // swap-in: swapped-out bytes it moved to host memory
    uint64_t left_waiting = 0;   // swap-in waiting for room: bytes left Absent or Out
    // Swap-in: where the time went (the rest is queueing the copies).
    uint64_t lock_ns = 0;    // waiting for the engine's lock
    uint64_t place_ns = 0;   // device memory made and mapped
    uint64_t create_ns = 0;  // of which making it (cuMemCreate)
    uint64_t access_ns = 0;  // access granted to it (cuMemSetAccess), not in place_ns
    uint64_t sync_ns = 0;    // waiting for the last copies
    // Swap-out: making host memory for it as it went (pinning), within ns.
    uint64_t making_ns = 0;
};

// The process holds GPU `gpu` now (granted, or scheduling failed open): new
// allocations get device memory at once, Absent chunks get memory and the
// chunks in host memory come back, newest allocations first, while `budget`
// bytes of device memory last; what does not fit stays in (or, if Absent or
// Out, goes to) host memory mapped at its address (Host). With
// `wait_for_room`, what the device refuses within the budget stays Absent or
// Out instead (left_waiting), for a later call once others have given back
// room: the previous holder may still be swapping out. The copies run on
// `stream` and are waited for: the program's work must not run before its
// data is back. Client thread, with a context of the GPU current.
// Except with `wait_for_room` where the device refused memory
// (short_of_room): the caller then calls again as room shows, and the
// copies queued so far run while that next round maps its chunks; the last
// round, or finish_copies, waits for them all.
Moved swap_in(uint32_t gpu, uint64_t budget, CUstream stream, bool wait_for_room = false);

// Waits for the copies of swap-in rounds on GPU `gpu` that no later round
// waited for; returns the ns it waited. Client thread.
uint64_t finish_copies(uint32_t gpu);

// While the host runs low on memory: gives back the host memory kept only
// to save pinning later, for data that is on GPU `gpu` (a holder that waits
// for room: those who give it need host memory to swap out to). Returns the
// bytes given back. Client thread.
uint64_t give_back_kept_host(uint32_t gpu);

// Before the process lets go of GPU `gpu` (its work drained): moves the chunks
// beyond the newest `keep` bytes to host memory (Out), copies on `stream`. New
// allocations wait for the next grant from now on. While the host runs low
// on memory, the host memory of what stays on the device is given back.
// Client thread, with a context of the GPU current.
Moved swap_out(uint32_t gpu, uint64_t keep, CUstream stream);

// Which chunks prestage() makes host memory for first.
enum class MakeOrder {
    // The newest: a swap_out(gpu, keep) copies them first, so that its
    // copies start at once while it makes what is missing.
    CopiedFirst,
    // The oldest: swap-outs that each keep less than the last (nvshared's
    // Shrink rounds) move them first.
    LeavingFirst,
};

// Makes host memory, about `max_bytes` of it (at least a chunk), for the
// chunks that a swap_out(gpu, keep) would move now and that have none yet
// (first, while the host runs low on memory, giving back that of the chunks
// it would keep), in `order`. True if more such chunks remain. Any thread,
// with a context current (the driver registers the memory).
bool prestage(uint32_t gpu, uint64_t keep, uint64_t max_bytes, MakeOrder order);

// Bytes that a swap_out(gpu, keep) would move now whose host memory is not
// made yet (making it costs about 4 times the copy). Any thread.
uint64_t unstaged_bytes(uint32_t gpu, uint64_t keep);

// The process no longer holds GPU `gpu` and nothing moves (released without
// oversubscription, revoked): new allocations wait for the next grant.
void let_go(uint32_t gpu);

// Bytes of swappable memory on GPU `gpu`: all of it, and what is on the device.
uint64_t total_bytes(uint32_t gpu);
uint64_t device_bytes(uint32_t gpu);

// Bytes of GPU `gpu`'s swappable memory in host memory while the process
// holds the GPU: the device had no room for them when they were made or
// came back; they run over the bus until they move (swap_in).
uint64_t stranded_bytes(uint32_t gpu);

void reset_after_fork();

}  // namespace nvshare::preload::swappable
