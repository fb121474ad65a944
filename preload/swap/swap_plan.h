// The swap engine's pure rules (no driver, no I/O; unit-tested directly):
// how an allocation is cut into physical chunks, which memory an allocation
// gets, and how much of it moves when the lock changes hands.
#pragma once

#include <cstddef>
#include <cstdint>

#include "preload/swap/tuning.h"

namespace nvshare::preload::swap_plan {

using tuning::kLargeChunk;
using tuning::kLargeChunkShare;
using tuning::kMaxChunk;

// The largest chunk for a GPU with `physical_memory` bytes.
uint64_t max_chunk_for(uint64_t physical_memory);

// An allocation of `bytes` as the engine lays it out: `reserved` bytes of
// address space (a multiple of the granularity), cut into `count` chunks of
// `chunk` bytes but the last, which holds the rest.
struct Layout {
    uint64_t reserved = 0;
    uint64_t chunk = 0;
    uint32_t count = 0;

    uint64_t offset_of(uint32_t i) const { return static_cast<uint64_t>(i) * chunk; }
    uint64_t size_of(uint32_t i) const { return i + 1 < count ? chunk : reserved - offset_of(i); }
    // For the address reservation: every chunk starts on a multiple of its
    // size where that is a power of two (the driver may then map it with
    // large pages); 0 (the driver's granularity) otherwise.
    uint64_t alignment() const { return (chunk & (chunk - 1)) == 0 ? chunk : 0; }
};

// `granularity`: the driver's (a power of two); `max_chunk` is rounded down
// to a multiple of it. count == 0 if the request cannot be laid out
// (zero bytes or granularity, overflow).
Layout layout(uint64_t bytes, uint64_t granularity, uint64_t max_chunk = kMaxChunk);

enum class Backing {
    Swappable,  // device memory the engine swaps (VMM chunks)
    Small,      // a block of a slab of such memory (small_blocks.h)
    Managed,    // managed memory the driver migrates
};

struct BackingFacts {
    bool engine_on = true;         // NVSHARE_SWAP is not "managed"
    bool gpu_supports = true;      // VMM and host-located VMM memory on this GPU
    uint64_t bytes = 0;            // asked for
    uint64_t granularity = 0;      // the GPU's VMM granularity
    bool beyond_capacity = false;  // this process would exceed the GPU alone
};

// The hybrid rule: swappable device memory for what the process can hold
// alone, allocations smaller than the granularity as blocks of slabs of it
// (a chunk of their own would waste most of it); managed memory for a
// process larger than the GPU (the driver then pages its hot data in) and
// where the engine cannot run.
Backing choose_backing(const BackingFacts& f);

// The bytes of a slab of small allocations on a GPU of VMM `granularity`
// (a power of two): tuning::kSmallSlab rounded up to it; 0 if none.
uint64_t small_slab(uint64_t granularity);

// What stays on a GPU of `capacity` bytes when the process lets go there
// and nvshared allows `allowed` bytes of its movable memory to stay
// (UINT64_MAX: nobody needs the room). The one place that decides it: the
// release, the cost of a switch and the host memory made ahead all ask it.
// `evict_all`: NVSHARE_EVICT=1, nothing stays.
struct Kept {
    uint64_t total = 0;   // of all movable memory (the swap engine's first)
    uint64_t engine = 0;  // of the swap engine's: `total` less the headroom and the
                          // driver's room
};
Kept kept_at_release(uint64_t allowed, uint64_t capacity, bool evict_all);

// Whether a chunk of `size` bytes may go on a GPU of `physical` bytes that
// has `free` bytes free now: what the driver needs beside allocations
// stays free (tuning::kDriverReserveShare). The one rule every device
// placement asks.
bool leaves_driver_reserve(uint64_t size, uint64_t free, uint64_t physical);
// The driver's room on a GPU of `memory` bytes (tuning::kDriverReserveShare).
uint64_t driver_reserve(uint64_t memory);

// How much of what this process uses (`own`) on a GPU of `capacity` to
// make host memory ahead for: what nvshared allows to stay (`allowed`;
// UINT64_MAX: nobody needs the room), but no more than leaves a next holder
// as much room as we use. nvshared counts the next holder's memory as it is
// now; one still allocating (a program starting) asks for more room later
// (Shrink), and that room then moves at the bus's speed into host memory
// made ahead. A switch itself leaves what nvshared allows: taking the next
// holder to be as big as us would make a large holder move far more than a
// smaller one needs at every switch, and count a switch too dear to let go
// in pauses it would fit.
uint64_t keep_beside_as_big(uint64_t allowed, uint64_t capacity, uint64_t own);

// The rate a kind of move reaches, for the cost of the next one: the better
// of the last two moves of at least kRateSampleBytes, the assumed rate
// standing in for the move before the first. One slow move does not set it
// alone: a process's first large swap-in spends most of its time mapping
// its chunks for the first time, and a holder that took such a rate for its
// next switch would hold through every later pause.
// A bus that is slow every time shows from the second move on.
class RateEstimate {
public:
    // Shorter moves are mostly fixed costs.
    static constexpr uint64_t kRateSampleBytes = 1ull << 30;

    void add(uint64_t bytes, uint64_t ns)
    {
        if (bytes < kRateSampleBytes || ns == 0)
            return;
        before_ = last_;
        last_ = static_cast<double>(bytes) * 1e9 / static_cast<double>(ns);
        ++samples_;
    }
    // Bytes per second.
    double get(double assumed) const
    {
        const double before = before_ > 0 ? before_ : assumed;
        return last_ > before ? last_ : before;
    }

    // Moves counted so far: the estimate changes with each.
    uint64_t samples() const { return samples_; }

private:
    double last_ = 0;
    double before_ = 0;
    uint64_t samples_ = 0;
};

// A RateEstimate of work done in pieces smaller than a sample (host memory
// is made a chunk at a time): pieces are summed, bytes and time, until they
// reach kRateSampleBytes, and the sum is one sample.
class SummedRate {
public:
    void add(uint64_t bytes, uint64_t ns)
    {
        bytes_ += bytes;
        ns_ += ns;
        if (bytes_ < RateEstimate::kRateSampleBytes)
            return;
        rate_.add(bytes_, ns_);
        bytes_ = ns_ = 0;
    }
    double get(double assumed) const { return rate_.get(assumed); }
    uint64_t samples() const { return rate_.samples(); }

private:
    RateEstimate rate_;
    uint64_t bytes_ = 0;
    uint64_t ns_ = 0;
};

// Bytes admitted one piece at a time while they fit.
class Budget {
public:
    explicit Budget(uint64_t bytes) : left_(bytes) {}
    // True (and counted) if `size` still fits.
    bool take(uint64_t size)
    {
        if (size > left_)
            return false;
        left_ -= size;
        return true;
    }
    uint64_t left() const { return left_; }

private:
    uint64_t left_;
};

// The last items of a sequence, as many as fit `bytes` together (at least
// one) and at most N: the engine walks its chunks newest first, and host
// memory made ahead for swap-outs that each move the oldest data first
// (nvshared's Shrink rounds) is made for the oldest first.
template <typename T, size_t N>
class LastFit {
public:
    explicit LastFit(uint64_t bytes) : bytes_(bytes) {}
    void push(const T& item, uint64_t size)
    {
        items_[(first_ + count_) % kSlots] = {item, size};
        ++count_;
        total_ += size;
        while (count_ > N || (count_ > 1 && total_ > bytes_)) {
            total_ -= items_[first_].size;
            first_ = (first_ + 1) % kSlots;
            --count_;
            dropped_ = true;
        }
    }
    size_t count() const { return count_; }
    // Item k of those kept, k = 0 the earliest in the sequence.
    const T& at(size_t k) const { return items_[(first_ + k) % kSlots].item; }
    uint64_t size_at(size_t k) const { return items_[(first_ + k) % kSlots].size; }
    // Whether an item was pushed out.
    bool dropped() const { return dropped_; }

private:
    struct Entry {
        T item{};
        uint64_t size = 0;
    };
    static constexpr size_t kSlots = N + 1;  // one over N while push() trims
    uint64_t bytes_;
    Entry items_[kSlots];
    size_t first_ = 0, count_ = 0;
    uint64_t total_ = 0;
    bool dropped_ = false;
};

}  // namespace nvshare::preload::swap_plan
