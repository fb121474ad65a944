// Open-addressing hash table of live allocations: key (device pointer or
// VMM handle) -> size, GPU, kind. Storage comes from mmap, so the preload
// library needs no C++ runtime. Not thread-safe: callers lock.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvshare::preload {

class AllocTable {
public:
    struct Entry {
        uint64_t key;
        uint64_t size;
        int32_t gpu;     // devices:: index
        uint16_t kind;   // devices::Kind
        uint16_t state;  // 0 empty, 1 live, 2 deleted
        uint64_t seq;    // order of allocation: larger is newer
        bool rewritten;  // asked for as device memory, made managed or swappable by nvshare
        bool swappable;  // memory of the swap engine (swap/swappable.h)
    };

    AllocTable() = default;
    AllocTable(const AllocTable&) = delete;
    AllocTable& operator=(const AllocTable&) = delete;

    // Adds or replaces; false only when memory for the table cannot be had.
    bool insert(uint64_t key, uint64_t size, int32_t gpu, uint16_t kind, bool rewritten = false,
                bool swappable = false);
    // Removes and returns the entry; false if the key is not there.
    bool remove(uint64_t key, Entry* out);
    bool find(uint64_t key, Entry* out) const;
    size_t size() const { return live_; }
    size_t capacity() const { return capacity_; }
    // Forgets everything (after fork: the parent's allocations are not ours).
    void clear();
    // Calls f(const Entry&) for every live entry, in no particular order.
    template <typename F>
    void for_each(F&& f) const
    {
        for (size_t i = 0; i < capacity_; ++i)
            if (slots_[i].state == 1)
                f(slots_[i]);
    }

private:
    bool grow();
    // Puts a live entry in a free slot, keeping its seq (growth must not
    // reorder allocations).
    void place(const Entry& e);
    size_t slot_of(uint64_t key) const;

    Entry* slots_ = nullptr;
    size_t capacity_ = 0;  // power of two
    size_t live_ = 0;
    size_t used_ = 0;  // live + deleted
    uint64_t next_seq_ = 1;
};

}  // namespace nvshare::preload
