// Allocations smaller than the swap granularity, carved out of slabs (pure:
// no driver, unit-tested). Each slab is one swappable allocation of
// tuning::kSmallSlab bytes (swappable.cpp makes it), so that small
// allocations swap with the rest and cost what cuMemAlloc memory costs;
// this file only keeps the books of which part of a slab is whose.
//
// First fit over segregated free lists with coalescing (a two-level
// segregated fit): a block of any size from 512 bytes to a slab, from any
// slab of the GPU with room, in O(1); a freed block joins its free
// neighbours at once, so that a slab whose blocks are all freed is one free
// block again and can be given back. Size classes of their own per slab
// would keep a partly used slab per class (a slab of slack each): here the
// slack is the free space of the slabs in use, and at most one empty slab
// (kept, so that a program that frees and allocates again does not make and
// give back a slab each time).
//
// Every block starts at a multiple of kAlign (cuMemAlloc gives at least 256
// bytes of alignment). Metadata: a descriptor per block (free or not) and,
// per slab, a bitmap of block starts and a table from a start to its
// descriptor, all in memory of its own (mmap; the library has no C++
// runtime). Not thread-safe: the caller locks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvshare::preload::small_blocks {

inline constexpr uint64_t kAlign = 512;
// A slab holds at most this many kAlign units (the descriptors' offsets).
inline constexpr uint64_t kMaxSlabUnits = 1ull << 20;

// A live block.
struct Block {
    uint64_t start;
    uint64_t bytes;  // asked for
    uint64_t id;     // the caller's, given at take()
    uint64_t tag;    // likewise
    uint32_t slab;
};

class Pool {
public:
    Pool() = default;
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    // Slabs of `slab_bytes` from now on (a multiple of kAlign, at most
    // kMaxSlabUnits of them); only while the pool has no slab.
    bool set_slab_bytes(uint64_t slab_bytes);
    uint64_t slab_bytes() const { return units_ * kAlign; }

    // A block of `bytes` (1 .. slab_bytes()) from a slab with room: its
    // address and slab, with `id` and `tag` kept for find(). False if no
    // slab has room (the caller adds one).
    bool take(uint64_t bytes, uint64_t id, uint64_t tag, uint64_t* addr, uint32_t* slab);

    // A new, empty slab of slab_bytes() at `base`: its number. False if
    // memory for the books cannot be had.
    bool add_slab(uint64_t base, uint32_t* slab);

    // The live block of slab `slab` that holds `addr` (its asked-for bytes),
    // false otherwise. O(slab units / 64).
    bool find(uint32_t slab, uint64_t addr, Block* out) const;

    // Frees the live block that starts at `addr` in slab `slab`; false if
    // none starts there. *drop_slab: the slab is now empty while another
    // empty one is kept, so it is no longer the pool's (the caller gives
    // its memory back).
    bool give(uint32_t slab, uint64_t addr, bool* drop_slab);

    // Whether a live block of slab `slab` starts at `addr`.
    bool live_at(uint32_t slab, uint64_t addr) const;
    // Whether slab `slab` is the pool's and has no live block.
    bool empty(uint32_t slab) const;
    uint32_t live_slabs() const { return live_slabs_; }

    // Forgets everything without giving memory back (a forked child: the
    // parent's books are not its own).
    void forget();

private:
    struct Node;
    struct Slab;
    static constexpr uint32_t kClasses = 128;

    uint32_t new_node();
    void drop_node(uint32_t n);
    void link_free(uint32_t n);
    void unlink_free(uint32_t n);
    uint32_t find_free(uint64_t units) const;
    bool grow_nodes();
    bool grow_slabs();
    void set_start(Slab& s, uint32_t unit, uint32_t node);
    void clear_start(Slab& s, uint32_t unit);

    uint64_t units_ = 0;  // per slab
    Node* nodes_ = nullptr;
    uint32_t node_capacity_ = 0;
    uint32_t nodes_used_ = 1;  // node 0 is "none"
    uint32_t free_nodes_ = 0;  // a list of unused descriptors, through next_free
    Slab* slabs_ = nullptr;
    uint32_t slab_capacity_ = 0;
    uint32_t slabs_used_ = 0;
    uint32_t free_slabs_ = UINT32_MAX;  // a list of unused slab numbers
    uint32_t live_slabs_ = 0;
    uint32_t empty_slabs_ = 0;
    uint32_t heads_[kClasses] = {};
    uint64_t nonempty_[kClasses / 64] = {};
};

// The free-list class of a block of `units` (1 ..), and the lowest class
// whose every block has at least `units` (for a search). Exposed for the
// tests.
uint32_t class_of(uint64_t units);
uint32_t class_at_least(uint64_t units);

}  // namespace nvshare::preload::small_blocks
