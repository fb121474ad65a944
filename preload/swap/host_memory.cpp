#include "preload/swap/host_memory.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "preload/clock.h"
#include "preload/driver/base_glibc.h"
#include "preload/driver/hook_table.h"
#include "preload/swap/host_budget.h"

namespace nvshare::preload::host_memory {

namespace {

// Huge pages are 2 MiB here; regions start on one so that all of it can use them.
constexpr uint64_t kHugePage = 2ull << 20;
// Threads that fault the memory in: zeroing pages is what costs, and it
// scales with cores (bench/README.md, driver_probes.py register).
constexpr long kMaxTouchThreads = 8;
// Work is handed out in pieces of this size, a few per thread and region.
constexpr uint64_t kPiece = 8ull << 20;
// Regions made at once (make() handles more in rounds).
constexpr size_t kBatch = 64;

std::atomic<uint64_t> g_made_bytes{0}, g_touch_ns{0}, g_register_ns{0};
std::atomic<uint64_t> g_refused_bytes{0};

// The host's memory now; unknown if /proc/meminfo cannot be read. Its
// first lines hold both figures.
host_budget::Figures figures_now()
{
    char text[1024];
    const int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return {};
    const ssize_t n = read(fd, text, sizeof text);
    close(fd);
    return n > 0 ? host_budget::parse_meminfo(text, static_cast<size_t>(n))
                 : host_budget::Figures{};
}

void* map_region(uint64_t bytes)
{
    const uint64_t span = bytes + kHugePage;
    void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return nullptr;
    // Trim to a huge-page-aligned start and the size asked for.
    const auto base = reinterpret_cast<uintptr_t>(m);
    const uintptr_t start = (base + kHugePage - 1) & ~(kHugePage - 1);
    if (start > base)
        munmap(m, start - base);
    const uintptr_t end = start + bytes, mapped_end = base + span;
    if (mapped_end > end)
        munmap(reinterpret_cast<void*>(end), mapped_end - end);
    void* region = reinterpret_cast<void*>(start);
    madvise(region, bytes, MADV_HUGEPAGE);  // advice only: small pages work too
    madvise(region, bytes, MADV_DONTFORK);
    return region;
}

struct Touch {
    char* const* regions;
    const uint64_t* sizes;
    size_t count;
    uint64_t pieces_per_region_max;
    std::atomic<uint64_t> next{0};
};

// Writes one byte per page of the pieces it takes, until none are left.
void* touch_pieces(void* arg)
{
    auto* t = static_cast<Touch*>(arg);
    const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    for (;;) {
        const uint64_t k = t->next.fetch_add(1, std::memory_order_relaxed);
        const uint64_t region = k / t->pieces_per_region_max;
        const uint64_t piece = k % t->pieces_per_region_max;
        if (region >= t->count)
            return nullptr;
        char* base = t->regions[region];
        const uint64_t from = piece * kPiece;
        if (base == nullptr || from >= t->sizes[region])
            continue;
        const uint64_t to = from + kPiece < t->sizes[region] ? from + kPiece : t->sizes[region];
        for (uint64_t off = from; off < to; off += page)
            static_cast<volatile char*>(base)[off] = 0;
    }
}

// Faults the regions in from several threads (the caller is one of them).
void touch_all(char* const* regions, const uint64_t* sizes, size_t count)
{
    uint64_t largest = 0, total = 0;
    for (size_t i = 0; i < count; ++i) {
        largest = sizes[i] > largest ? sizes[i] : largest;
        total += regions[i] != nullptr ? sizes[i] : 0;
    }
    Touch t{regions, sizes, count, (largest + kPiece - 1) / kPiece};
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long helpers = (cores < kMaxTouchThreads ? cores : kMaxTouchThreads) - 1;
    const auto pieces = static_cast<long>(total / kPiece);
    helpers = helpers < pieces ? helpers : pieces;
    pthread_t threads[kMaxTouchThreads];
    long started = 0;
    for (; started < helpers; ++started)
        if (base_glibc::pthread_create(&threads[started], nullptr, touch_pieces, &t) != 0)
            break;  // fewer helpers: the caller does the rest
    touch_pieces(&t);
    for (long i = 0; i < started; ++i)
        base_glibc::pthread_join(threads[i], nullptr);
}

}  // namespace

// In rounds, in order: each round pins what the budget allows as the host
// is now (host_budget::pinnable, read again once the last round's memory is
// in), so that processes pinning at once see each other's memory; a region
// that no longer fits ends it, and it and the rest are refused.
uint64_t make(const uint64_t* sizes, void** out, size_t count)
{
    auto do_register = NVS_REAL(cuMemHostRegister_v2);
    uint64_t made = 0;
    for (size_t first = 0; first < count;) {
        char* regions[kBatch];
        uint64_t allowed = host_budget::pinnable(figures_now());
        size_t n = 0;
        for (; n < kBatch && first + n < count && sizes[first + n] <= allowed; ++n) {
            allowed -= sizes[first + n];
            regions[n] =
                do_register != nullptr ? static_cast<char*>(map_region(sizes[first + n])) : nullptr;
        }
        if (n == 0) {  // the host has no more for us
            for (size_t i = first; i < count; ++i) {
                g_refused_bytes.fetch_add(sizes[i], std::memory_order_relaxed);
                out[i] = nullptr;
            }
            break;
        }
        const uint64_t touching = now_ns();
        touch_all(regions, sizes + first, n);
        const uint64_t registering = now_ns();
        g_touch_ns.fetch_add(registering - touching, std::memory_order_relaxed);
        for (size_t i = 0; i < n; ++i) {
            const uint64_t bytes = sizes[first + i];
            if (regions[i] != nullptr &&
                do_register(regions[i], bytes, CU_MEMHOSTREGISTER_PORTABLE) != CUDA_SUCCESS) {
                munmap(regions[i], bytes);
                regions[i] = nullptr;
            }
            out[first + i] = regions[i];
            made += regions[i] != nullptr ? bytes : 0;
        }
        g_register_ns.fetch_add(now_ns() - registering, std::memory_order_relaxed);
        first += n;
    }
    g_made_bytes.fetch_add(made, std::memory_order_relaxed);
    return made;
}

Made take_made()
{
    const uint64_t bytes = g_made_bytes.exchange(0, std::memory_order_relaxed);
    const uint64_t touch_ns = g_touch_ns.exchange(0, std::memory_order_relaxed);
    const uint64_t register_ns = g_register_ns.exchange(0, std::memory_order_relaxed);
    Made m;
    snprintf(m.text, sizeof m.text, "%llu MiB, %llu ms faulting it in, %llu ms registering it",
             static_cast<unsigned long long>(bytes >> 20),
             static_cast<unsigned long long>(touch_ns / 1000000),
             static_cast<unsigned long long>(register_ns / 1000000));
    return m;
}

bool host_low()
{
    return host_budget::low(figures_now());
}

bool may_pin(uint64_t bytes)
{
    return bytes <= host_budget::pinnable(figures_now());
}

uint64_t take_refused()
{
    return g_refused_bytes.exchange(0, std::memory_order_relaxed);
}

void release(void* region, uint64_t bytes)
{
    if (region == nullptr)
        return;
    if (auto unregister = NVS_REAL(cuMemHostUnregister); unregister != nullptr)
        unregister(region);
    munmap(region, bytes);
}

}  // namespace nvshare::preload::host_memory
