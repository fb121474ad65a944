#include "preload/swap/host_memory.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "preload/clock.h"
#include "preload/driver/base_glibc.h"
#include "preload/driver/hook_table.h"
#include "preload/swap/host_budget.h"
#include "preload/swap/swap_plan.h"

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

// The rate of making host memory (most makes are of one chunk).
pthread_mutex_t g_rate_mutex = PTHREAD_MUTEX_INITIALIZER;
swap_plan::SummedRate g_pin_rate;

void note_made(uint64_t bytes, uint64_t ns)
{
    pthread_mutex_lock(&g_rate_mutex);
    g_pin_rate.add(bytes, ns);
    pthread_mutex_unlock(&g_rate_mutex);
}

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

// The regions of one round, faulted in a piece at a time by helper threads
// and the caller, in order: region after region, so that the first are
// whole while later ones are still being touched.
struct Touch {
    char* const* regions;
    const uint64_t* sizes;
    size_t count;
    uint64_t pieces_per_region_max;
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    std::atomic<uint64_t> next{0};
    std::atomic<uint64_t> left[kBatch];  // pieces of each region not yet touched

    Touch(char* const* r, const uint64_t* s, size_t n) : regions(r), sizes(s), count(n)
    {
        uint64_t largest = 0;
        for (size_t i = 0; i < n; ++i)
            largest = s[i] > largest ? s[i] : largest;
        pieces_per_region_max = (largest + kPiece - 1) / kPiece;
        for (size_t i = 0; i < n; ++i)
            left[i].store(r[i] != nullptr ? (s[i] + kPiece - 1) / kPiece : 0,
                          std::memory_order_relaxed);
    }

    // Writes one byte per page of the next piece; false once none is left.
    bool touch_one()
    {
        for (;;) {
            const uint64_t k = next.fetch_add(1, std::memory_order_relaxed);
            const uint64_t region = k / pieces_per_region_max;
            const uint64_t piece = k % pieces_per_region_max;
            if (region >= count)
                return false;
            char* base = regions[region];
            const uint64_t from = piece * kPiece;
            if (base == nullptr || from >= sizes[region])
                continue;
            const uint64_t to = from + kPiece < sizes[region] ? from + kPiece : sizes[region];
            for (uint64_t off = from; off < to; off += page)
                static_cast<volatile char*>(base)[off] = 0;
            left[region].fetch_sub(1, std::memory_order_release);
            return true;
        }
    }

    // Whether region i is faulted in: its pages' writes happen before what
    // follows (the registration).
    bool whole(size_t i) const { return left[i].load(std::memory_order_acquire) == 0; }
};

void* touch_pieces(void* arg)
{
    auto* t = static_cast<Touch*>(arg);
    while (t->touch_one()) {
    }
    return nullptr;
}

}  // namespace

// In rounds, in order: each round pins what the budget allows as the host
// is now (host_budget::pinnable, read again once the last round's memory is
// in), so that processes pinning at once see each other's memory; a region
// that no longer fits ends it, and it and the rest are refused.
//
// In a round, helper threads fault the regions in while the caller
// registers each as soon as it is whole (and faults in pieces itself while
// the next is not): registering runs beside the faulting instead of after
// it, which makes pinned memory about 1.7 times faster on a host of 16
// cores (bench/README.md, pin_rate).
uint64_t make(const uint64_t* sizes, void** out, size_t count)
{
    auto do_register = NVS_REAL(cuMemHostRegister_v2);
    uint64_t made = 0;
    for (size_t first = 0; first < count;) {
        char* regions[kBatch];
        uint64_t allowed = host_budget::pinnable(figures_now());
        size_t n = 0;
        uint64_t total = 0;
        for (; n < kBatch && first + n < count && sizes[first + n] <= allowed; ++n) {
            allowed -= sizes[first + n];
            regions[n] =
                do_register != nullptr ? static_cast<char*>(map_region(sizes[first + n])) : nullptr;
            total += regions[n] != nullptr ? sizes[first + n] : 0;
        }
        if (n == 0) {  // the host has no more for us
            for (size_t i = first; i < count; ++i) {
                g_refused_bytes.fetch_add(sizes[i], std::memory_order_relaxed);
                out[i] = nullptr;
            }
            break;
        }
        const uint64_t start = now_ns();
        uint64_t registering = 0, round_made = 0;
        Touch t(regions, sizes + first, n);
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        long helpers = (cores < kMaxTouchThreads ? cores : kMaxTouchThreads) - 1;
        const auto pieces = static_cast<long>(total / kPiece);
        helpers = helpers < pieces ? helpers : pieces;
        pthread_t threads[kMaxTouchThreads];
        long started = 0;
        for (; started < helpers; ++started)
            if (base_glibc::pthread_create(&threads[started], nullptr, touch_pieces, &t) != 0)
                break;  // fewer helpers: the caller does the rest
        for (size_t i = 0; i < n; ++i) {
            while (!t.whole(i))
                if (!t.touch_one())
                    sched_yield();  // a helper is on the region's last pieces
            const uint64_t bytes = sizes[first + i];
            const uint64_t from = now_ns();
            if (regions[i] != nullptr &&
                do_register(regions[i], bytes, CU_MEMHOSTREGISTER_PORTABLE) != CUDA_SUCCESS) {
                munmap(regions[i], bytes);
                regions[i] = nullptr;
            }
            registering += now_ns() - from;
            out[first + i] = regions[i];
            round_made += regions[i] != nullptr ? bytes : 0;
        }
        for (long i = 0; i < started; ++i)
            base_glibc::pthread_join(threads[i], nullptr);
        const uint64_t took = now_ns() - start;
        g_touch_ns.fetch_add(took > registering ? took - registering : 0,
                             std::memory_order_relaxed);
        g_register_ns.fetch_add(registering, std::memory_order_relaxed);
        if (round_made != 0)
            note_made(round_made, took);
        made += round_made;
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

double pin_rate(double assumed)
{
    pthread_mutex_lock(&g_rate_mutex);
    const double rate = g_pin_rate.get(assumed);
    pthread_mutex_unlock(&g_rate_mutex);
    return rate;
}

uint64_t pin_rate_samples()
{
    pthread_mutex_lock(&g_rate_mutex);
    const uint64_t samples = g_pin_rate.samples();
    pthread_mutex_unlock(&g_rate_mutex);
    return samples;
}

void reset_after_fork()
{
    pthread_mutex_init(&g_rate_mutex, nullptr);  // the rate, of the same host, stays
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
