// The process's allocations per kind (device pointers, cuMemCreate handles
// and their extra references, arrays), each counted on its GPU (devices.h),
// and the graph memory pools. Filled by the allocation hooks
// (hooks/alloc_hooks.cpp); read by residency (what to move) and the client
// thread (graph memory).
#pragma once

#include <cstddef>
#include <cstdint>

#include "preload/memory/alloc_table.h"
#include "preload/memory/devices.h"

namespace nvshare::preload::alloc {

enum class Table { Pointers, Handles, Arrays };

// Counts `size` bytes of `kind` on GPU `gpu` under `key`; `rewritten`: asked
// for as device memory, made managed or swappable by nvshare; `swappable`:
// memory of the swap engine (counted as Managed: it can be paged out).
void track(Table table, uint64_t key, uint64_t size, int gpu, devices::Kind kind,
           bool rewritten = false, bool swappable = false);
// Removes before the real free: once freed, the address may be handed out
// again at once to another thread and tracked anew. False if not tracked.
bool untrack(Table table, uint64_t key, AllocTable::Entry* out);
// Tracks again what untrack() removed (the real free failed).
void retrack(Table table, const AllocTable::Entry& e);

// A retained handle is the same value: counts one more reference to a
// tracked handle.
void retain_handle(uint64_t handle);
// Takes the extra references of `handle` out (false if none), to put back
// what is left after the real release (put_handle_refs, 0: none).
bool take_handle_refs(uint64_t handle, AllocTable::Entry* refs);
void put_handle_refs(uint64_t handle, uint64_t left, const AllocTable::Entry& refs);

struct Range {
    uint64_t ptr;
    uint64_t size;
    uint64_t seq;  // allocation order: larger is newer
};

// The process's managed allocations on GPU `gpu` (devices:: index), newest
// first, at most `max` of them; returns how many were written. What the
// driver's migration moves in bulk when the lock changes hands (the swap
// engine's memory moves by its own means).
size_t managed_ranges(uint32_t gpu, Range* out, size_t max);

// True if `ptr` is the start of an allocation the program asked for as
// device memory and nvshare made managed or swappable.
bool made_managed(uint64_t ptr);

// Graph memory (allocation nodes, stream-ordered allocations made during
// capture) lives in the driver's graph pool of each GPU from the graph's
// launch until trimmed, never paged. Once the process made any
// (note_graph_memory), the client thread counts the pools' size as pinned
// memory (refresh_graph_memory).
void note_graph_memory();
bool graph_memory_in_use();
void refresh_graph_memory();

void reset_after_fork();

}  // namespace nvshare::preload::alloc
