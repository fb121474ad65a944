#include "preload/memory/alloc_table.h"

#include <sys/mman.h>

namespace nvshare::preload {

namespace {

constexpr size_t kInitialCapacity = 1024;

uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

AllocTable::Entry* map_slots(size_t n)
{
    void* p = mmap(nullptr, n * sizeof(AllocTable::Entry), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<AllocTable::Entry*>(p);  // zeroed: all empty
}

}  // namespace

size_t AllocTable::slot_of(uint64_t key) const
{
    return mix(key) & (capacity_ - 1);
}

bool AllocTable::grow()
{
    const size_t n = capacity_ == 0 ? kInitialCapacity : capacity_ * 2;
    Entry* fresh = map_slots(n);
    if (fresh == nullptr)
        return false;
    Entry* old = slots_;
    const size_t old_capacity = capacity_;
    slots_ = fresh;
    capacity_ = n;
    live_ = used_ = 0;
    for (size_t i = 0; i < old_capacity; ++i)
        if (old[i].state == 1)
            place(old[i]);
    if (old != nullptr)
        munmap(old, old_capacity * sizeof(Entry));
    return true;
}

void AllocTable::place(const Entry& e)
{
    size_t i = slot_of(e.key);
    while (slots_[i].state != 0)
        i = (i + 1) & (capacity_ - 1);
    slots_[i] = e;
    ++live_;
    ++used_;
}

bool AllocTable::insert(uint64_t key, uint64_t size, int32_t gpu, uint16_t kind, bool rewritten,
                        bool swappable)
{
    // Keep the load (deleted slots included) under 1/2 so probes stay short.
    if ((used_ + 1) * 2 > capacity_ && !grow())
        return false;
    size_t i = slot_of(key);
    size_t reuse = capacity_;
    for (;;) {
        Entry& e = slots_[i];
        if (e.state == 1 && e.key == key) {
            e.size = size;
            e.gpu = gpu;
            e.kind = kind;
            e.rewritten = rewritten;
            e.swappable = swappable;
            e.seq = next_seq_++;
            return true;
        }
        if (e.state == 2 && reuse == capacity_)
            reuse = i;
        if (e.state == 0)
            break;
        i = (i + 1) & (capacity_ - 1);
    }
    if (reuse == capacity_) {
        reuse = i;
        ++used_;
    }
    slots_[reuse] = {key, size, gpu, kind, 1, next_seq_++, rewritten, swappable};
    ++live_;
    return true;
}

bool AllocTable::find(uint64_t key, Entry* out) const
{
    if (capacity_ == 0)
        return false;
    for (size_t i = slot_of(key);; i = (i + 1) & (capacity_ - 1)) {
        const Entry& e = slots_[i];
        if (e.state == 0)
            return false;
        if (e.state == 1 && e.key == key) {
            if (out != nullptr)
                *out = e;
            return true;
        }
    }
}

bool AllocTable::remove(uint64_t key, Entry* out)
{
    if (capacity_ == 0)
        return false;
    for (size_t i = slot_of(key);; i = (i + 1) & (capacity_ - 1)) {
        Entry& e = slots_[i];
        if (e.state == 0)
            return false;
        if (e.state == 1 && e.key == key) {
            if (out != nullptr)
                *out = e;
            e.state = 2;
            --live_;
            return true;
        }
    }
}

void AllocTable::clear()
{
    if (slots_ != nullptr)
        munmap(slots_, capacity_ * sizeof(Entry));
    slots_ = nullptr;
    capacity_ = live_ = used_ = 0;
}

}  // namespace nvshare::preload
