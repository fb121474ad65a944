// pin_rate: ways to make pinned host memory for swapped-out chunks, each
// timed over the same total (default 8 GiB) in regions of the engine's chunk
// size (default 512 MiB): anonymous memory with transparent huge pages,
// faulted in by touching one byte a page from T threads, then registered
// with cuMemHostRegister, as libnvshare's host_memory::make does.
//
//   serial      region after region: touch (T threads), then register
//   batch       touch every region (T threads), then register each
//   pipelined   T threads touch region k+1 while this thread registers k
//   parallel-R  R threads, each touching (T/R threads) and registering its
//               own regions
//   whole       touch all, one cuMemHostRegister of one region of the total
//   untouched   register untouched regions (the driver faults them in)
//
// Usage: pin_rate [--gib N] [--region-mib N] [--threads T]
// Prints one line a way: GB/s, and the time spent touching and registering
// (summed over threads where several register).
#include <cuda.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr uint64_t kHuge = 2ull << 20;

double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void check(CUresult r, const char* what)
{
    if (r != CUDA_SUCCESS) {
        const char* s = nullptr;
        cuGetErrorString(r, &s);
        std::fprintf(stderr, "%s: %s\n", what, s ? s : "?");
        std::exit(1);
    }
}

char* map_region(uint64_t bytes)
{
    void* m =
        mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        std::perror("mmap");
        std::exit(1);
    }
    auto base = reinterpret_cast<uintptr_t>(m);
    uintptr_t start = (base + kHuge - 1) & ~(kHuge - 1);
    if (start > base)
        munmap(m, start - base);
    if (base + bytes + kHuge > start + bytes)
        munmap(reinterpret_cast<void*>(start + bytes), base + bytes + kHuge - (start + bytes));
    madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);
    return reinterpret_cast<char*>(start);
}

// One byte a page of [p, p + bytes) from `threads` threads.
void touch(char* p, uint64_t bytes, int threads)
{
    const uint64_t piece = 8ull << 20;
    std::atomic<uint64_t> next{0};
    auto work = [&] {
        const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        for (;;) {
            const uint64_t from = next.fetch_add(piece);
            if (from >= bytes)
                return;
            const uint64_t to = from + piece < bytes ? from + piece : bytes;
            for (uint64_t off = from; off < to; off += page)
                static_cast<volatile char*>(p)[off] = 0;
        }
    };
    std::vector<std::thread> ts;
    for (int i = 1; i < threads; ++i)
        ts.emplace_back(work);
    work();
    for (auto& t : ts)
        t.join();
}

struct Figures {
    double total = 0, touching = 0, registering = 0;
};

void report(const std::string& way, uint64_t bytes, const Figures& f)
{
    std::printf("%-28s %6.2f GB/s  (touching %5.0f ms, registering %5.0f ms)\n", way.c_str(),
                static_cast<double>(bytes) / f.total / 1e9, f.touching * 1e3, f.registering * 1e3);
    std::fflush(stdout);
}

void unpin(std::vector<char*>& regions, uint64_t region)
{
    for (char* p : regions) {
        cuMemHostUnregister(p);
        munmap(p, region);
    }
    regions.clear();
}

std::vector<char*> regions_of(uint64_t total, uint64_t region)
{
    std::vector<char*> r;
    for (uint64_t off = 0; off < total; off += region)
        r.push_back(map_region(region));
    return r;
}

Figures serial(uint64_t total, uint64_t region, int threads, bool batch)
{
    std::vector<char*> rs = regions_of(total, region);
    Figures f;
    const double t0 = now_s();
    if (batch) {
        const double a = now_s();
        // as host_memory::make: every region's pieces from one pool
        for (char* p : rs)
            touch(p, region, threads);
        f.touching = now_s() - a;
        const double b = now_s();
        for (char* p : rs)
            check(cuMemHostRegister(p, region, CU_MEMHOSTREGISTER_PORTABLE), "register");
        f.registering = now_s() - b;
    } else {
        for (char* p : rs) {
            const double a = now_s();
            touch(p, region, threads);
            const double b = now_s();
            check(cuMemHostRegister(p, region, CU_MEMHOSTREGISTER_PORTABLE), "register");
            f.touching += b - a;
            f.registering += now_s() - b;
        }
    }
    f.total = now_s() - t0;
    unpin(rs, region);
    return f;
}

Figures pipelined(uint64_t total, uint64_t region, int threads)
{
    std::vector<char*> rs = regions_of(total, region);
    std::vector<std::atomic<bool>> ready(rs.size());
    Figures f;
    const double t0 = now_s();
    std::thread toucher([&] {
        const double a = now_s();
        for (size_t k = 0; k < rs.size(); ++k) {
            touch(rs[k], region, threads);
            ready[k].store(true);
        }
        f.touching = now_s() - a;
    });
    for (size_t k = 0; k < rs.size(); ++k) {
        while (!ready[k].load())
            std::this_thread::yield();
        const double b = now_s();
        check(cuMemHostRegister(rs[k], region, CU_MEMHOSTREGISTER_PORTABLE), "register");
        f.registering += now_s() - b;
    }
    toucher.join();
    f.total = now_s() - t0;
    unpin(rs, region);
    return f;
}

Figures parallel(uint64_t total, uint64_t region, int threads, int registrars, CUcontext ctx)
{
    std::vector<char*> rs = regions_of(total, region);
    std::atomic<size_t> next{0};
    std::vector<Figures> per(registrars);
    const double t0 = now_s();
    std::vector<std::thread> ts;
    for (int i = 0; i < registrars; ++i)
        ts.emplace_back([&, i] {
            cuCtxSetCurrent(ctx);
            for (;;) {
                const size_t k = next.fetch_add(1);
                if (k >= rs.size())
                    return;
                const double a = now_s();
                touch(rs[k], region, threads / registrars > 0 ? threads / registrars : 1);
                const double b = now_s();
                check(cuMemHostRegister(rs[k], region, CU_MEMHOSTREGISTER_PORTABLE), "register");
                per[i].touching += b - a;
                per[i].registering += now_s() - b;
            }
        });
    for (auto& t : ts)
        t.join();
    Figures f;
    f.total = now_s() - t0;
    for (auto& p : per) {
        f.touching += p.touching;
        f.registering += p.registering;
    }
    unpin(rs, region);
    return f;
}

Figures whole(uint64_t total, int threads, bool touched)
{
    char* p = map_region(total);
    Figures f;
    const double t0 = now_s();
    if (touched)
        touch(p, total, threads);
    const double b = now_s();
    check(cuMemHostRegister(p, total, CU_MEMHOSTREGISTER_PORTABLE), "register");
    f.total = now_s() - t0;
    f.touching = b - t0;
    f.registering = f.total - f.touching;
    cuMemHostUnregister(p);
    munmap(p, total);
    return f;
}

Figures untouched(uint64_t total, uint64_t region)
{
    std::vector<char*> rs = regions_of(total, region);
    Figures f;
    const double t0 = now_s();
    for (char* p : rs)
        check(cuMemHostRegister(p, region, CU_MEMHOSTREGISTER_PORTABLE), "register");
    f.total = f.registering = now_s() - t0;
    unpin(rs, region);
    return f;
}

}  // namespace

int main(int argc, char** argv)
{
    uint64_t gib = 8, region_mib = 512;
    int threads = 8;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--gib")
            gib = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--region-mib")
            region_mib = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--threads")
            threads = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: pin_rate [--gib N] [--region-mib N] [--threads T]\n");
            return 2;
        }
    }
    const uint64_t total = gib << 30, region = region_mib << 20;
    check(cuInit(0), "cuInit");
    CUdevice dev;
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    CUcontext ctx;
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
    check(cuCtxSetCurrent(ctx), "set");
    std::printf("%llu GiB in regions of %llu MiB, %d touching threads, %ld cores\n",
                static_cast<unsigned long long>(gib), static_cast<unsigned long long>(region_mib),
                threads, sysconf(_SC_NPROCESSORS_ONLN));
    whole(1ull << 30, threads, true);  // warm the driver
    for (int round = 0; round < 2; ++round) {
        report("serial", total, serial(total, region, threads, false));
        report("batch", total, serial(total, region, threads, true));
        report("pipelined", total, pipelined(total, region, threads));
        report("parallel-2", total, parallel(total, region, threads, 2, ctx));
        report("parallel-4", total, parallel(total, region, threads, 4, ctx));
        report("serial, 2x threads", total, serial(total, region, 2 * threads, false));
        report("pipelined, 2x threads", total, pipelined(total, region, 2 * threads));
        report("whole", total, whole(total, threads, true));
        report("untouched", total, untouched(total, region));
    }
    return 0;
}
