// Allocation rewrite and accounting (the hooks themselves are exported from
// alloc.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvshare::preload::alloc {

void reset_after_fork();

struct Range {
    uint64_t ptr;
    uint64_t size;
    uint64_t seq;  // allocation order: larger is newer
};

// The process's managed allocations on GPU `gpu` (devices:: index), newest
// first, at most `max` of them; returns how many were written. What nvshare
// moves in bulk when the lock changes hands.
size_t managed_ranges(uint32_t gpu, Range* out, size_t max);

// True if `ptr` is the start of an allocation the program asked for as
// device memory and nvshare made managed.
bool made_managed(uint64_t ptr);

// Graph memory (allocation nodes, stream-ordered allocations made during
// capture) lives in the driver's graph pool of each GPU from the graph's
// launch until trimmed, never paged. Once the process made any, the client
// thread counts the pools' size as pinned memory (refresh_graph_memory).
bool graph_memory_in_use();
void refresh_graph_memory();

}  // namespace nvshare::preload::alloc
