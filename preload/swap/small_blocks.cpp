#include "preload/swap/small_blocks.h"

#include <sys/mman.h>

#include <cstring>

namespace nvshare::preload::small_blocks {

struct Pool::Node {
    uint64_t bytes;  // asked for (live), 0 (free)
    uint64_t id;
    uint64_t tag;
    uint32_t slab;
    uint32_t offset;  // in units
    uint32_t units;
    uint32_t prev;  // the block before and after it in its slab (0: none)
    uint32_t next;
    uint32_t prev_free;  // in its free list (free blocks only)
    uint32_t next_free;
    bool free;
};

struct Pool::Slab {
    uint64_t base;
    uint64_t* starts;      // a bit per unit: a block starts there
    uint32_t* node_at;     // per unit: the block that starts there
    uint64_t book_bytes;   // of starts + node_at (one mapping)
    uint32_t used;         // live units
    uint32_t next_unused;  // in the list of unused slab numbers
    bool live;
};

namespace {

void* map_pages(size_t bytes)
{
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

uint32_t log2_floor(uint64_t v)
{
    return 63 - static_cast<uint32_t>(__builtin_clzll(v));
}

}  // namespace

// Four classes per power of two: a block's class is its power of two and
// the next two bits of its size.
uint32_t class_of(uint64_t units)
{
    const uint32_t fl = log2_floor(units);
    if (fl < 2)
        return static_cast<uint32_t>(units);
    return fl * 4 + static_cast<uint32_t>((units >> (fl - 2)) & 3);
}

uint32_t class_at_least(uint64_t units)
{
    const uint32_t fl = log2_floor(units);
    if (fl < 2)
        return static_cast<uint32_t>(units);
    // Up to the next class's smallest size: every block there is as large.
    return class_of(units + (1ull << (fl - 2)) - 1);
}

bool Pool::set_slab_bytes(uint64_t slab_bytes)
{
    if (slabs_used_ != 0 || slab_bytes == 0 || slab_bytes % kAlign != 0 ||
        slab_bytes / kAlign > kMaxSlabUnits)
        return false;
    units_ = slab_bytes / kAlign;
    return true;
}

bool Pool::grow_nodes()
{
    const uint32_t n = node_capacity_ == 0 ? 1024 : node_capacity_ * 2;
    if (n <= node_capacity_)
        return false;
    auto* fresh = static_cast<Node*>(map_pages(n * sizeof(Node)));
    if (fresh == nullptr)
        return false;
    if (nodes_ != nullptr) {
        memcpy(fresh, nodes_, node_capacity_ * sizeof(Node));
        munmap(nodes_, node_capacity_ * sizeof(Node));
    }
    nodes_ = fresh;
    node_capacity_ = n;
    return true;
}

uint32_t Pool::new_node()
{
    uint32_t n = free_nodes_;
    if (n != 0) {
        free_nodes_ = nodes_[n].next_free;
    } else {
        if (nodes_used_ >= node_capacity_ && !grow_nodes())
            return 0;
        n = nodes_used_++;
    }
    memset(&nodes_[n], 0, sizeof(Node));
    return n;
}

void Pool::drop_node(uint32_t n)
{
    nodes_[n].next_free = free_nodes_;
    free_nodes_ = n;
}

void Pool::link_free(uint32_t n)
{
    Node& b = nodes_[n];
    const uint32_t c = class_of(b.units);
    b.free = true;
    b.bytes = 0;
    b.prev_free = 0;
    b.next_free = heads_[c];
    if (heads_[c] != 0)
        nodes_[heads_[c]].prev_free = n;
    heads_[c] = n;
    nonempty_[c / 64] |= 1ull << (c % 64);
}

void Pool::unlink_free(uint32_t n)
{
    Node& b = nodes_[n];
    const uint32_t c = class_of(b.units);
    if (b.prev_free != 0)
        nodes_[b.prev_free].next_free = b.next_free;
    else
        heads_[c] = b.next_free;
    if (b.next_free != 0)
        nodes_[b.next_free].prev_free = b.prev_free;
    if (heads_[c] == 0)
        nonempty_[c / 64] &= ~(1ull << (c % 64));
    b.free = false;
}

// The first free block in the lowest non-empty class at or above the one
// whose blocks all hold `units`; 0 if none.
uint32_t Pool::find_free(uint64_t units) const
{
    const uint32_t from = class_at_least(units);
    for (uint32_t w = from / 64; w < kClasses / 64; ++w) {
        uint64_t bits = nonempty_[w];
        if (w == from / 64)
            bits &= ~0ull << (from % 64);
        if (bits != 0)
            return heads_[w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits))];
    }
    return 0;
}

void Pool::set_start(Slab& s, uint32_t unit, uint32_t node)
{
    s.starts[unit / 64] |= 1ull << (unit % 64);
    s.node_at[unit] = node;
}

void Pool::clear_start(Slab& s, uint32_t unit)
{
    s.starts[unit / 64] &= ~(1ull << (unit % 64));
    s.node_at[unit] = 0;
}

bool Pool::take(uint64_t bytes, uint64_t id, uint64_t tag, uint64_t* addr, uint32_t* slab)
{
    const uint64_t units = bytes == 0 ? 1 : (bytes + kAlign - 1) / kAlign;
    if (units_ == 0 || units > units_ || bytes > units_ * kAlign)
        return false;
    const uint32_t n = find_free(units);
    if (n == 0)
        return false;
    // The rest of the block stays free, as a block of its own.
    uint32_t rest = 0;
    if (nodes_[n].units > units && (rest = new_node()) == 0)
        return false;
    unlink_free(n);
    Node& b = nodes_[n];
    Slab& s = slabs_[b.slab];
    if (rest != 0) {
        Node& r = nodes_[rest];
        r.slab = b.slab;
        r.offset = b.offset + static_cast<uint32_t>(units);
        r.units = b.units - static_cast<uint32_t>(units);
        r.prev = n;
        r.next = b.next;
        if (b.next != 0)
            nodes_[b.next].prev = rest;
        b.next = rest;
        b.units = static_cast<uint32_t>(units);
        set_start(s, r.offset, rest);
        link_free(rest);
    }
    if (s.used == 0)
        empty_slabs_--;
    s.used += b.units;
    b.bytes = bytes;
    b.id = id;
    b.tag = tag;
    *addr = s.base + b.offset * kAlign;
    *slab = b.slab;
    return true;
}

bool Pool::grow_slabs()
{
    const uint32_t n = slab_capacity_ == 0 ? 64 : slab_capacity_ * 2;
    if (n <= slab_capacity_)
        return false;
    auto* fresh = static_cast<Slab*>(map_pages(n * sizeof(Slab)));
    if (fresh == nullptr)
        return false;
    if (slabs_ != nullptr) {
        memcpy(fresh, slabs_, slab_capacity_ * sizeof(Slab));
        munmap(slabs_, slab_capacity_ * sizeof(Slab));
    }
    slabs_ = fresh;
    slab_capacity_ = n;
    return true;
}

bool Pool::add_slab(uint64_t base, uint32_t* slab)
{
    if (units_ == 0)
        return false;
    if (free_slabs_ == UINT32_MAX && slabs_used_ == slab_capacity_ && !grow_slabs())
        return false;
    const uint64_t words = (units_ + 63) / 64;
    const uint64_t book = words * sizeof(uint64_t) + units_ * sizeof(uint32_t);
    void* books = map_pages(book);
    const uint32_t n = books != nullptr ? new_node() : 0;
    if (n == 0) {
        if (books != nullptr)
            munmap(books, book);
        return false;
    }
    uint32_t i = free_slabs_;
    if (i != UINT32_MAX)
        free_slabs_ = slabs_[i].next_unused;
    else
        i = slabs_used_++;
    Slab& s = slabs_[i];
    s = Slab{};
    s.base = base;
    s.starts = static_cast<uint64_t*>(books);
    s.node_at = reinterpret_cast<uint32_t*>(s.starts + words);
    s.book_bytes = book;
    s.live = true;
    Node& b = nodes_[n];
    b.slab = i;
    b.units = static_cast<uint32_t>(units_);
    set_start(s, 0, n);
    link_free(n);
    live_slabs_++;
    empty_slabs_++;
    *slab = i;
    return true;
}

bool Pool::find(uint32_t slab, uint64_t addr, Block* out) const
{
    if (slab >= slabs_used_ || !slabs_[slab].live)
        return false;
    const Slab& s = slabs_[slab];
    if (addr < s.base || addr - s.base >= units_ * kAlign)
        return false;
    // The last block start at or below addr's unit.
    const uint64_t unit = (addr - s.base) / kAlign;
    uint64_t w = unit / 64;
    uint64_t bits = s.starts[w] & (~0ull >> (63 - unit % 64));
    while (bits == 0 && w > 0)
        bits = s.starts[--w];
    if (bits == 0)
        return false;
    const Node& b = nodes_[s.node_at[w * 64 + log2_floor(bits)]];
    const uint64_t start = s.base + b.offset * kAlign;
    if (b.free || addr - start >= b.bytes)
        return false;
    *out = {start, b.bytes, b.id, b.tag, slab};
    return true;
}

bool Pool::give(uint32_t slab, uint64_t addr, bool* drop_slab)
{
    *drop_slab = false;
    if (slab >= slabs_used_ || !slabs_[slab].live)
        return false;
    Slab& s = slabs_[slab];
    if (addr < s.base || addr - s.base >= units_ * kAlign || (addr - s.base) % kAlign != 0)
        return false;
    const auto unit = static_cast<uint32_t>((addr - s.base) / kAlign);
    uint32_t n = s.node_at[unit];
    if (n == 0 || nodes_[n].free)
        return false;
    s.used -= nodes_[n].units;
    // Joined with its free neighbours: the one after into it, it into the
    // one before.
    if (const uint32_t next = nodes_[n].next; next != 0 && nodes_[next].free) {
        unlink_free(next);
        nodes_[n].units += nodes_[next].units;
        nodes_[n].next = nodes_[next].next;
        if (nodes_[next].next != 0)
            nodes_[nodes_[next].next].prev = n;
        clear_start(s, nodes_[next].offset);
        drop_node(next);
    }
    if (const uint32_t prev = nodes_[n].prev; prev != 0 && nodes_[prev].free) {
        unlink_free(prev);
        nodes_[prev].units += nodes_[n].units;
        nodes_[prev].next = nodes_[n].next;
        if (nodes_[n].next != 0)
            nodes_[nodes_[n].next].prev = prev;
        clear_start(s, nodes_[n].offset);
        drop_node(n);
        n = prev;
    }
    link_free(n);
    if (s.used != 0)
        return true;
    if (empty_slabs_ == 0) {
        empty_slabs_++;  // kept for the next allocations
        return true;
    }
    // Another empty slab is kept: this one goes.
    unlink_free(n);
    drop_node(n);
    munmap(s.starts, s.book_bytes);
    s.live = false;
    s.next_unused = free_slabs_;
    free_slabs_ = slab;
    live_slabs_--;
    *drop_slab = true;
    return true;
}

bool Pool::live_at(uint32_t slab, uint64_t addr) const
{
    if (slab >= slabs_used_ || !slabs_[slab].live)
        return false;
    const Slab& s = slabs_[slab];
    if (addr < s.base || addr - s.base >= units_ * kAlign || (addr - s.base) % kAlign != 0)
        return false;
    const uint32_t n = s.node_at[(addr - s.base) / kAlign];
    return n != 0 && !nodes_[n].free;
}

bool Pool::empty(uint32_t slab) const
{
    return slab < slabs_used_ && slabs_[slab].live && slabs_[slab].used == 0;
}

void Pool::forget()
{
    nodes_ = nullptr;
    node_capacity_ = 0;
    nodes_used_ = 1;
    free_nodes_ = 0;
    slabs_ = nullptr;
    slab_capacity_ = slabs_used_ = live_slabs_ = empty_slabs_ = 0;
    free_slabs_ = UINT32_MAX;
    memset(heads_, 0, sizeof heads_);
    memset(nonempty_, 0, sizeof nonempty_);
}

}  // namespace nvshare::preload::small_blocks
