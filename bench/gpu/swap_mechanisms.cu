// Swap mechanisms for an oversubscribed GPU (issue 13): how fast each way of
// moving a process's working set off the GPU and back runs, measured in one
// process on one GPU, so that the swap mechanism can be chosen by measurement.
//
//   swap_mechanisms [--gib N] [--rounds R] [--device D]
//                   [--sections bus,vmm,hostvmm,ring,managed] [--chunks-mib 2,64,512]
//                   [--ring-slots 4] [--ring-mib 256] [--batch-mib 64] [--streams 4]
//                   [--no-batch]
//
// Sections (all by default, in this order):
//   bus      C. pinned cudaMemcpyAsync D2H, H2D and both at once (the bus limit;
//               every other line's ratio is taken against these figures)
//   vmm      B. explicit swap of cuMemCreate memory mapped with cuMemMap:
//               copy-out/in through a whole-size pinned buffer, the cost of
//               unmap+release and create+map+setaccess for each chunk size, and
//               A out while B in on two streams
//   hostvmm  B'. the swap engine's own mechanism (libnvshare.so): each 64 MiB
//               device chunk is copied (cuMemcpyAsync) to a host-located VMM
//               chunk (cuMemCreate, CU_MEM_LOCATION_TYPE_HOST) mapped at a
//               staging reservation; the host chunk is then mapped at the
//               user's address in place of the device chunk (a kernel reads it
//               there over the bus: verified), and back; first host chunk
//               creation (pinning), remap costs, and A out while B in
//   ring     B. the same copies through a bounded pinned staging ring into a
//               pageable buffer (host threads memcpy), and plain pageable copies
//   managed  A. managed memory moved by the driver (cudaMemPrefetchAsync):
//               first placement, eviction (first and repeated), swap-in,
//               multi-stream, batch and discard variants, advice variant,
//               fault-driven placement and swap-in, and the bidirectional case
//
// Every measurement is repeated --rounds times; one JSON line per mechanism
// gives the median ({"mechanism", "direction", "gbs", "seconds", ...}); a
// table follows at the end. Progress goes to stderr. Limits: GPU memory
// <= 2 x N (+ a few MiB), pinned host memory <= 2 x N, pageable host <= 2 x N.
// Every CUDA call is checked; a failure prints the call and exits 1. A data
// mismatch after a round trip prints a "verify_failed" line and exits 2.
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
#define HAVE_BATCH_API 1
#else
#define HAVE_BATCH_API 0
#endif

// ---------------------------------------------------------------- errors

static const char* g_phase = "start";
static int g_verify_failures = 0;
static bool g_batch = true;  // false with --no-batch

[[noreturn]] static void die(const char* call, const char* err, const char* file, int line)
{
    fflush(stdout);
    fprintf(stderr, "swap_mechanisms: FAILED in phase '%s' at %s:%d\n  %s\n  -> %s\n", g_phase,
            file, line, call, err);
    if (strstr(err, "MEMORY") || strstr(err, "memory"))
        fprintf(stderr, "  (out of memory: try a smaller --gib)\n");
    fflush(stderr);
    _exit(1);  // no teardown: other threads may be inside the driver
}

static void check_rt(cudaError_t e, const char* call, const char* file, int line)
{
    if (e != cudaSuccess) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
        die(call, buf, file, line);
    }
}

static void check_drv(CUresult r, const char* call, const char* file, int line)
{
    if (r != CUDA_SUCCESS) {
        const char *name = "?", *str = "?";
        cuGetErrorName(r, &name);
        cuGetErrorString(r, &str);
        char buf[256];
        snprintf(buf, sizeof buf, "%s (%s)", name, str);
        die(call, buf, file, line);
    }
}

#define CK(call) check_rt((call), #call, __FILE__, __LINE__)
#define CU(call) check_drv((call), #call, __FILE__, __LINE__)
#define KCHECK() CK(cudaGetLastError())

// For optional mechanisms: false (after printing why, once) instead of exiting.
static bool soft(cudaError_t e, const char* call, const char* mechanism)
{
    static std::set<std::string> told;
    if (e == cudaSuccess)
        return true;
    cudaGetLastError();  // clear a non-sticky error
    if (!told.insert(mechanism).second)
        return false;
    printf("{\"mechanism\": \"%s\", \"skipped\": \"%s returned %s\"}\n", mechanism, call,
           cudaGetErrorName(e));
    fflush(stdout);
    return false;
}

static void progress(const char* fmt, ...)
{
    static const auto t0 = std::chrono::steady_clock::now();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fprintf(stderr, "[%7.2f s] ", t);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// ---------------------------------------------------------------- kernels

__device__ __forceinline__ unsigned long long pattern(size_t i, unsigned long long seed)
{
    return (i * 0x9E3779B97F4A7C15ull) ^ seed;
}

__global__ void fill_kernel(unsigned long long* p, size_t n, unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = pattern(i, seed);
}

__global__ void verify_kernel(const unsigned long long* p, size_t n, unsigned long long seed,
                              unsigned long long* bad)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        mine += p[i] != pattern(i, seed);
    if (mine)
        atomicAdd(bad, mine);
}

// One write per 4 KiB page: fault-driven population of never-touched memory.
__global__ void touch_write(char* p, size_t bytes)
{
    for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4096; i < bytes;
         i += (size_t)gridDim.x * blockDim.x * 4096)
        p[i] = 0;
}

// One read per 4 KiB page: fault-driven migration of evicted data, data kept.
__global__ void touch_read(const char* p, size_t bytes, int* sink)
{
    int s = 0;
    for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4096; i < bytes;
         i += (size_t)gridDim.x * blockDim.x * 4096)
        s += p[i];
    if (s == 0x7fffffff)
        *sink = s;
}

static unsigned long long* g_bad;  // device counter for verify_kernel
static int* g_sink;

static void fill(void* p, size_t bytes, unsigned long long seed, cudaStream_t s = 0)
{
    fill_kernel<<<1024, 512, 0, s>>>(static_cast<unsigned long long*>(p), bytes / 8, seed);
    KCHECK();
    CK(cudaStreamSynchronize(s));
}

static void verify(const void* p, size_t bytes, unsigned long long seed, const char* what)
{
    CK(cudaMemset(g_bad, 0, sizeof *g_bad));
    verify_kernel<<<1024, 512>>>(static_cast<const unsigned long long*>(p), bytes / 8, seed, g_bad);
    KCHECK();
    CK(cudaDeviceSynchronize());
    unsigned long long bad = 0;
    CK(cudaMemcpy(&bad, g_bad, sizeof bad, cudaMemcpyDeviceToHost));
    if (bad) {
        ++g_verify_failures;
        printf("{\"verify_failed\": \"%s\", \"bad_words\": %llu}\n", what, bad);
        fflush(stdout);
    }
}

// ---------------------------------------------------------------- results

enum Ref { REF_NONE, REF_D2H, REF_H2D, REF_BIDIR };

struct Entry {
    std::string mech, dir;
    double bytes;
    Ref ref;
    std::vector<double> secs;
    std::string extra;  // appended to the JSON line (", \"key\": value" ...)
    double gpu_used = -1, host_used = -1;
    bool printed = false;
};

static std::vector<Entry> g_entries;
static double g_bus[4] = {0, 0, 0, 0};  // GB/s by Ref
static double g_host_base = 0;          // host memory in use at start, GiB

static double median(std::vector<double> v)
{
    if (v.empty())
        return NAN;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static Entry& entry(const std::string& mech, const std::string& dir, double bytes, Ref ref)
{
    for (auto& e : g_entries)
        if (e.mech == mech && e.dir == dir)
            return e;
    g_entries.push_back(Entry{mech, dir, bytes, ref, {}, {}});
    return g_entries.back();
}

static double host_used_gib()
{
    FILE* f = fopen("/proc/meminfo", "r");
    if (!f)
        return NAN;
    char line[256];
    double total = NAN, avail = NAN;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            total = kb;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            avail = kb;
    }
    fclose(f);
    return (total - avail) / (1024.0 * 1024.0);
}

static double gpu_used_gib()
{
    size_t fr = 0, tot = 0;
    CK(cudaMemGetInfo(&fr, &tot));
    return (tot - fr) / double(1ull << 30);
}

// Records one round's time; with snap, also the GPU and host memory in use
// right after the operation (the last round's figures are printed).
static void add(const std::string& mech, const std::string& dir, double bytes, Ref ref, double s,
                bool snap = false)
{
    Entry& e = entry(mech, dir, bytes, ref);
    e.secs.push_back(s);
    if (snap) {
        e.gpu_used = gpu_used_gib();
        e.host_used = host_used_gib() - g_host_base;
    }
}

static double gbs_of(const Entry& e)
{
    return e.bytes / std::max(median(e.secs), 1e-9) / 1e9;  // finite for JSON
}

static double ratio_of(const Entry& e)
{
    return e.ref != REF_NONE && g_bus[e.ref] > 0 ? gbs_of(e) / g_bus[e.ref] : NAN;
}

static void flush_results()
{
    for (auto& e : g_entries) {
        if (e.printed || e.secs.empty())
            continue;
        e.printed = true;
        const double med = median(e.secs);
        const auto mm = std::minmax_element(e.secs.begin(), e.secs.end());
        printf(
            "{\"mechanism\": \"%s\", \"direction\": \"%s\", \"gbs\": %.2f, \"seconds\": %.6f, "
            "\"ms\": %.3f, \"bytes\": %.0f, \"rounds\": %zu, \"min_s\": %.6f, \"max_s\": %.6f",
            e.mech.c_str(), e.dir.c_str(), gbs_of(e), med, med * 1e3, e.bytes, e.secs.size(),
            *mm.first, *mm.second);
        const double r = ratio_of(e);
        if (!std::isnan(r))
            printf(", \"ratio_to_bus\": %.3f", r);
        if (e.gpu_used >= 0)
            printf(", \"gpu_used_gib_after\": %.2f, \"host_used_gib_after\": %.2f", e.gpu_used,
                   e.host_used);
        printf("%s}\n", e.extra.c_str());
    }
    fflush(stdout);
}

static void print_table()
{
    int w = 9;
    for (const auto& e : g_entries)
        w = std::max(w, int(e.mech.size()));
    printf("\n%-*s %-6s %9s %10s %7s\n", w, "mechanism", "dir", "GB/s", "median ms", "x bus");
    printf("%s\n", std::string(w + 36, '-').c_str());
    for (const auto& e : g_entries) {
        if (e.secs.empty())
            continue;
        const double r = ratio_of(e);
        char rs[16] = "-";
        if (!std::isnan(r))
            snprintf(rs, sizeof rs, "%.2f", r);
        printf("%-*s %-6s %9.2f %10.1f %7s\n", w, e.mech.c_str(), e.dir.c_str(), gbs_of(e),
               median(e.secs) * 1e3, rs);
    }
    printf(
        "x bus: against pinned D2H for out, pinned H2D for in/place, pinned D2H+H2D at once "
        "for bidir (GB/s of both directions together).\n");
    fflush(stdout);
}

// ---------------------------------------------------------------- options

struct Options {
    double gib = 8;
    int rounds = 3;
    int device = 0;
    std::string sections = "bus,vmm,hostvmm,ring,managed";
    std::vector<size_t> chunks_mib = {2, 64, 512};
    int ring_slots = 4;
    size_t ring_mib = 256;
    size_t batch_mib = 64;
    int streams = 4;
    bool batch = true;  // --no-batch: skip the CUDA 13 batch/discard calls
};

static bool has_section(const Options& o, const char* s)
{
    std::string list = "," + o.sections + ",";
    return list.find(std::string(",") + s + ",") != std::string::npos;
}

[[noreturn]] static void usage(int rc)
{
    fprintf(
        rc ? stderr : stdout,
        "usage: swap_mechanisms [--gib N (default 8, 0.25..256)] [--rounds R (default 3)]\n"
        "         [--device D] [--sections bus,vmm,hostvmm,ring,managed] [--chunks-mib 2,64,512]\n"
        "         [--ring-slots 4] [--ring-mib 256] [--batch-mib 64] [--streams 4]\n"
        "         [--no-batch (skip the CUDA 13 batch and discard calls)]\n");
    exit(rc);
}

static Options parse(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        auto val = [&]() -> const char* {
            if (i + 1 >= argc)
                usage(2);
            return argv[++i];
        };
        if (!strcmp(argv[i], "--gib"))
            o.gib = atof(val());
        else if (!strcmp(argv[i], "--rounds"))
            o.rounds = atoi(val());
        else if (!strcmp(argv[i], "--device"))
            o.device = atoi(val());
        else if (!strcmp(argv[i], "--sections"))
            o.sections = val();
        else if (!strcmp(argv[i], "--chunks-mib")) {
            o.chunks_mib.clear();
            std::string s = val();
            for (size_t p = 0; p < s.size();) {
                size_t q = s.find(',', p);
                if (q == std::string::npos)
                    q = s.size();
                o.chunks_mib.push_back(strtoull(s.substr(p, q - p).c_str(), nullptr, 10));
                p = q + 1;
            }
        } else if (!strcmp(argv[i], "--ring-slots"))
            o.ring_slots = atoi(val());
        else if (!strcmp(argv[i], "--ring-mib"))
            o.ring_mib = strtoull(val(), nullptr, 10);
        else if (!strcmp(argv[i], "--batch-mib"))
            o.batch_mib = strtoull(val(), nullptr, 10);
        else if (!strcmp(argv[i], "--streams"))
            o.streams = atoi(val());
        else if (!strcmp(argv[i], "--no-batch"))
            o.batch = false;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            usage(0);
        else {
            fprintf(stderr, "swap_mechanisms: unknown argument %s\n", argv[i]);
            usage(2);
        }
    }
    if (!(o.gib >= 0.25 && o.gib <= 256) || o.rounds < 1 || o.rounds > 100 || o.ring_slots < 1 ||
        o.ring_slots > 64 || o.ring_mib < 2 || o.batch_mib < 2 || o.streams < 1 || o.streams > 64) {
        fprintf(stderr, "swap_mechanisms: option out of range\n");
        usage(2);
    }
    for (size_t c : o.chunks_mib)
        if (c < 2 || c % 2) {
            fprintf(stderr, "swap_mechanisms: --chunks-mib values must be even and >= 2\n");
            usage(2);
        }
    return o;
}

// ---------------------------------------------------------------- common

static const size_t MiB = 1ull << 20;
static size_t N;  // working set, bytes (multiple of 64 MiB)
static int g_dev;
static CUdevice g_cudev;
static CUcontext g_ctx;

static std::string mib_str(size_t b)
{
    char s[32];
    snprintf(s, sizeof s, "%zu MiB", b / MiB);
    return s;
}

// ---------------------------------------------------------------- C. bus

static void section_bus(const Options& o, char* hostA, char* hostB)
{
    g_phase = "bus";
    progress("bus: pinned cudaMemcpyAsync, %s each way", mib_str(N).c_str());
    void *dA, *dB;
    CK(cudaMalloc(&dA, N));
    CK(cudaMalloc(&dB, N));
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    fill(dA, N, 1);
    fill(dB, N, 2);
    // warm-up, not measured
    CK(cudaMemcpyAsync(hostA, dA, N, cudaMemcpyDeviceToHost, s1));
    CK(cudaMemcpyAsync(dB, hostA, N, cudaMemcpyHostToDevice, s1));
    CK(cudaStreamSynchronize(s1));
    CK(cudaMemcpyAsync(hostB, dB, N, cudaMemcpyDeviceToHost, s1));  // hostB = pattern 1
    CK(cudaStreamSynchronize(s1));
    for (int r = 0; r < o.rounds; ++r) {
        double t = now_s();
        CK(cudaMemcpyAsync(hostA, dA, N, cudaMemcpyDeviceToHost, s1));
        CK(cudaStreamSynchronize(s1));
        add("pinned cudaMemcpyAsync D2H (bus limit)", "out", N, REF_D2H, now_s() - t);
        t = now_s();
        CK(cudaMemcpyAsync(dB, hostB, N, cudaMemcpyHostToDevice, s1));
        CK(cudaStreamSynchronize(s1));
        add("pinned cudaMemcpyAsync H2D (bus limit)", "in", N, REF_H2D, now_s() - t);
        t = now_s();
        CK(cudaMemcpyAsync(hostA, dA, N, cudaMemcpyDeviceToHost, s1));
        CK(cudaMemcpyAsync(dB, hostB, N, cudaMemcpyHostToDevice, s2));
        CK(cudaStreamSynchronize(s1));
        CK(cudaStreamSynchronize(s2));
        add("pinned D2H + H2D at once, two streams (bus limit)", "bidir", 2.0 * N, REF_BIDIR,
            now_s() - t);
    }
    verify(dB, N, 1, "bus H2D");
    g_bus[REF_D2H] = gbs_of(entry("pinned cudaMemcpyAsync D2H (bus limit)", "out", 0, REF_NONE));
    g_bus[REF_H2D] = gbs_of(entry("pinned cudaMemcpyAsync H2D (bus limit)", "in", 0, REF_NONE));
    g_bus[REF_BIDIR] =
        gbs_of(entry("pinned D2H + H2D at once, two streams (bus limit)", "bidir", 0, REF_NONE));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    CK(cudaFree(dA));
    CK(cudaFree(dB));
    flush_results();
}

// ---------------------------------------------------------------- B. VMM

struct Vmm {
    CUdeviceptr va = 0;
    size_t reserved = 0, chunk = 0;
    std::vector<CUmemGenericAllocationHandle> h;
};

static CUmemAllocationProp vmm_prop()
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = g_cudev;
    return p;
}

struct CreateTimes {
    double create = 0, map = 0, access = 0;
};
struct ReleaseTimes {
    double unmap = 0, release = 0;
};

static void vmm_reserve(Vmm& v, size_t bytes, size_t chunk)
{
    v.chunk = chunk;
    v.reserved = (bytes + chunk - 1) / chunk * chunk;
    const size_t align = (chunk & (chunk - 1)) == 0 ? chunk : 0;  // 0: the default
    CU(cuMemAddressReserve(&v.va, v.reserved, align, 0, 0));
}

static CreateTimes vmm_create(Vmm& v)
{
    CreateTimes t;
    const CUmemAllocationProp prop = vmm_prop();
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    const size_t n = v.reserved / v.chunk;
    v.h.assign(n, 0);
    double t0 = now_s();
    for (size_t i = 0; i < n; ++i)
        CU(cuMemCreate(&v.h[i], v.chunk, &prop, 0));
    double t1 = now_s();
    for (size_t i = 0; i < n; ++i)
        CU(cuMemMap(v.va + i * v.chunk, v.chunk, 0, v.h[i], 0));
    double t2 = now_s();
    for (size_t i = 0; i < n; ++i)
        CU(cuMemSetAccess(v.va + i * v.chunk, v.chunk, &acc, 1));
    double t3 = now_s();
    t.create = t1 - t0;
    t.map = t2 - t1;
    t.access = t3 - t2;
    return t;
}

static ReleaseTimes vmm_release(Vmm& v)
{
    ReleaseTimes t;
    CK(cudaDeviceSynchronize());
    double t0 = now_s();
    for (size_t i = 0; i < v.h.size(); ++i)
        CU(cuMemUnmap(v.va + i * v.chunk, v.chunk));
    double t1 = now_s();
    for (auto h : v.h)
        CU(cuMemRelease(h));
    double t2 = now_s();
    v.h.clear();
    t.unmap = t1 - t0;
    t.release = t2 - t1;
    return t;
}

static void vmm_free(Vmm& v)
{
    if (!v.h.empty())
        vmm_release(v);
    if (v.va)
        CU(cuMemAddressFree(v.va, v.reserved));
    v.va = 0;
}

static void section_vmm(const Options& o, char* hostA, char* hostB)
{
    g_phase = "vmm";
    const CUmemAllocationProp prop = vmm_prop();
    size_t gran_min = 0, gran_rec = 0;
    CU(cuMemGetAllocationGranularity(&gran_min, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CU(cuMemGetAllocationGranularity(&gran_rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    printf("{\"vmm_granularity_min\": %zu, \"vmm_granularity_recommended\": %zu}\n", gran_min,
           gran_rec);
    fflush(stdout);
    CUstream s1, s2;
    CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));

    for (size_t cmib : o.chunks_mib) {
        const size_t chunk = cmib * MiB;
        if (chunk % gran_min) {
            printf(
                "{\"mechanism\": \"vmm chunk %zu MiB\", \"skipped\": \"not a multiple of the "
                "granularity %zu\"}\n",
                cmib, gran_min);
            continue;
        }
        if (chunk > N) {
            printf("{\"mechanism\": \"vmm chunk %zu MiB\", \"skipped\": \"larger than --gib\"}\n",
                   cmib);
            continue;
        }
        progress("vmm: chunk %zu MiB (%zu handles)", cmib, (N + chunk - 1) / chunk);
        char tag[64];
        snprintf(tag, sizeof tag, "vmm %zu MiB chunks (%zu handles)", cmib,
                 (N + chunk - 1) / chunk);
        const std::string m = tag;
        Vmm v;
        vmm_reserve(v, N, chunk);
        const CreateTimes first = vmm_create(v);
        add(m + ": first create+map+setaccess", "create", N, REF_NONE,
            first.create + first.map + first.access);
        fill(reinterpret_cast<void*>(v.va), N, 3);
        double cr = 0, mp = 0, ac = 0, um = 0, rl = 0;
        for (int r = 0; r < o.rounds; ++r) {
            double t = now_s();
            CU(cuMemcpyDtoHAsync(hostA, v.va, N, s1));
            CU(cuStreamSynchronize(s1));
            const double t_out = now_s() - t;
            add(m + ": copy-out to whole-size pinned", "out", N, REF_D2H, t_out);
            const ReleaseTimes rt = vmm_release(v);
            add(m + ": release (unmap+release)", "free", N, REF_NONE, rt.unmap + rt.release);
            add(m + ": swap-out total (copy-out + release)", "out", N, REF_D2H,
                t_out + rt.unmap + rt.release);
            const CreateTimes ct = vmm_create(v);
            add(m + ": re-create (create+map+setaccess)", "create", N, REF_NONE,
                ct.create + ct.map + ct.access);
            t = now_s();
            CU(cuMemcpyHtoDAsync(v.va, hostA, N, s1));
            CU(cuStreamSynchronize(s1));
            const double t_in = now_s() - t;
            add(m + ": copy-in from whole-size pinned", "in", N, REF_H2D, t_in);
            add(m + ": swap-in total (re-create + copy-in)", "in", N, REF_H2D,
                t_in + ct.create + ct.map + ct.access);
            verify(reinterpret_cast<void*>(v.va), N, 3, tag);
            cr += ct.create;
            mp += ct.map;
            ac += ct.access;
            um += rt.unmap;
            rl += rt.release;
        }
        char ex[160];
        snprintf(ex, sizeof ex, ", \"mean_unmap_ms\": %.1f, \"mean_release_ms\": %.1f",
                 um / o.rounds * 1e3, rl / o.rounds * 1e3);
        entry(m + ": release (unmap+release)", "free", N, REF_NONE).extra = ex;
        snprintf(ex, sizeof ex,
                 ", \"mean_create_ms\": %.1f, \"mean_map_ms\": %.1f, \"mean_setaccess_ms\": %.1f",
                 cr / o.rounds * 1e3, mp / o.rounds * 1e3, ac / o.rounds * 1e3);
        entry(m + ": re-create (create+map+setaccess)", "create", N, REF_NONE).extra = ex;
        vmm_free(v);
        flush_results();
    }

    // Bidirectional: A copy-out while B copy-in, both mapped, pinned both.
    {
        size_t chunk = 64 * MiB;
        if (chunk % gran_min)
            chunk = gran_min;
        progress("vmm: bidirectional, A out while B in (%s chunks)", mib_str(chunk).c_str());
        Vmm a, b;
        vmm_reserve(a, N, chunk);
        vmm_create(a);
        vmm_reserve(b, N, chunk);
        vmm_create(b);
        fill(reinterpret_cast<void*>(a.va), N, 4);
        fill(reinterpret_cast<void*>(b.va), N, 5);
        CU(cuMemcpyDtoHAsync(hostB, b.va, N, s2));  // hostB holds B's data
        CU(cuStreamSynchronize(s2));
        const std::string m = "vmm pinned bidirectional: A copy-out while B copy-in";
        std::vector<double> alone_out, alone_in, sum, mx;
        for (int r = 0; r < o.rounds; ++r) {
            double t = now_s();
            CU(cuMemcpyDtoHAsync(hostA, a.va, N, s1));
            CU(cuStreamSynchronize(s1));
            const double to = now_s() - t;
            t = now_s();
            CU(cuMemcpyHtoDAsync(b.va, hostB, N, s2));
            CU(cuStreamSynchronize(s2));
            const double ti = now_s() - t;
            t = now_s();
            CU(cuMemcpyDtoHAsync(hostA, a.va, N, s1));
            CU(cuMemcpyHtoDAsync(b.va, hostB, N, s2));
            CU(cuStreamSynchronize(s1));
            CU(cuStreamSynchronize(s2));
            add(m, "bidir", 2.0 * N, REF_BIDIR, now_s() - t);
            alone_out.push_back(to);
            alone_in.push_back(ti);
            sum.push_back(to + ti);
            mx.push_back(std::max(to, ti));
        }
        verify(reinterpret_cast<void*>(b.va), N, 5, "vmm bidirectional B");
        char ex[200];
        snprintf(ex, sizeof ex,
                 ", \"alone_out_s\": %.4f, \"alone_in_s\": %.4f, \"sum_alone_s\": %.4f, "
                 "\"max_alone_s\": %.4f",
                 median(alone_out), median(alone_in), median(sum), median(mx));
        entry(m, "bidir", 2.0 * N, REF_BIDIR).extra = ex;
        vmm_free(a);
        vmm_free(b);
        flush_results();
    }
    CU(cuStreamDestroy(s1));
    CU(cuStreamDestroy(s2));
}

// ---------------------------------------------------------------- B'. host VMM

// One allocation as libnvshare.so's swap engine holds it: the user's
// reservation (device chunks mapped while resident, host chunks while
// swapped out) and a staging reservation where the host chunks stay mapped.
struct HostVmm {
    CUdeviceptr user = 0, staging = 0;
    size_t reserved = 0, chunk = 0;
    std::vector<CUmemGenericAllocationHandle> dev, host;
    bool host_mapped = false;  // the user's range maps the host chunks
};

static CUmemAccessDesc device_access()
{
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = g_cudev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return acc;
}

static void map_chunk(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    const CUmemAccessDesc acc = device_access();
    CU(cuMemMap(va, size, 0, h, 0));
    CU(cuMemSetAccess(va, size, &acc, 1));
}

// Device chunks mapped at the user's range; returns seconds.
static double hostvmm_create_device(HostVmm& v)
{
    const CUmemAllocationProp prop = vmm_prop();
    const size_t n = v.reserved / v.chunk;
    v.dev.assign(n, 0);
    const double t = now_s();
    for (size_t i = 0; i < n; ++i) {
        CU(cuMemCreate(&v.dev[i], v.chunk, &prop, 0));
        if (v.host_mapped)
            CU(cuMemUnmap(v.user + i * v.chunk, v.chunk));
        map_chunk(v.user + i * v.chunk, v.chunk, v.dev[i]);
    }
    v.host_mapped = false;
    return now_s() - t;
}

// Host chunks, mapped at the staging range; returns seconds (pinning).
static double hostvmm_create_host(HostVmm& v)
{
    CUmemAllocationProp prop = vmm_prop();
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
    const size_t n = v.reserved / v.chunk;
    v.host.assign(n, 0);
    const double t = now_s();
    for (size_t i = 0; i < n; ++i) {
        CU(cuMemCreate(&v.host[i], v.chunk, &prop, 0));
        map_chunk(v.staging + i * v.chunk, v.chunk, v.host[i]);
    }
    return now_s() - t;
}

// The same with `threads` threads, each making every threads-th chunk (the
// host chunks must not exist yet); returns seconds. Pinning is the kernel's
// page allocation and zeroing: does it scale with threads?
static double hostvmm_create_host_threads(HostVmm& v, int threads)
{
    CUmemAllocationProp prop = vmm_prop();
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
    const size_t n = v.reserved / v.chunk;
    v.host.assign(n, 0);
    CUcontext ctx = nullptr;
    CU(cuCtxGetCurrent(&ctx));
    const double t = now_s();
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k)
        pool.emplace_back([&, k] {
            CU(cuCtxSetCurrent(ctx));
            for (size_t i = static_cast<size_t>(k); i < n; i += static_cast<size_t>(threads)) {
                CU(cuMemCreate(&v.host[i], v.chunk, &prop, 0));
                map_chunk(v.staging + i * v.chunk, v.chunk, v.host[i]);
            }
        });
    for (auto& th : pool)
        th.join();
    return now_s() - t;
}

static void hostvmm_release_host(HostVmm& v)
{
    CU(cuMemUnmap(v.staging, v.reserved));
    for (auto h : v.host)
        CU(cuMemRelease(h));
    v.host.clear();
}

// Copy every chunk user -> staging on `s` (not waited for).
static void hostvmm_copy(const HostVmm& v, bool out, CUstream s)
{
    for (size_t off = 0; off < v.reserved; off += v.chunk)
        CU(out ? cuMemcpyAsync(v.staging + off, v.user + off, v.chunk, s)
               : cuMemcpyAsync(v.user + off, v.staging + off, v.chunk, s));
}

// The swap-out remap: host chunk in place of the device chunk; seconds.
static double hostvmm_remap_to_host(HostVmm& v)
{
    const double t = now_s();
    for (size_t i = 0; i < v.dev.size(); ++i) {
        CU(cuMemUnmap(v.user + i * v.chunk, v.chunk));
        map_chunk(v.user + i * v.chunk, v.chunk, v.host[i]);
        CU(cuMemRelease(v.dev[i]));
    }
    v.dev.clear();
    v.host_mapped = true;
    return now_s() - t;
}

static void hostvmm_free(HostVmm& v)
{
    CK(cudaDeviceSynchronize());
    CU(cuMemUnmap(v.user, v.reserved));
    CU(cuMemUnmap(v.staging, v.reserved));
    for (auto h : v.dev)
        CU(cuMemRelease(h));
    for (auto h : v.host)
        CU(cuMemRelease(h));
    CU(cuMemAddressFree(v.user, v.reserved));
    CU(cuMemAddressFree(v.staging, v.reserved));
    v = HostVmm{};
}

static void hostvmm_reserve(HostVmm& v, size_t bytes, size_t chunk)
{
    v.chunk = chunk;
    v.reserved = (bytes + chunk - 1) / chunk * chunk;
    CU(cuMemAddressReserve(&v.user, v.reserved, 0, 0, 0));
    CU(cuMemAddressReserve(&v.staging, v.reserved, 0, 0, 0));
}

static void section_hostvmm(const Options& o)
{
    g_phase = "hostvmm";
    int host_vmm = 0;
    CU(cuDeviceGetAttribute(&host_vmm, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                            g_cudev));
    printf("{\"host_vmm_supported\": %d}\n", host_vmm);
    if (!host_vmm)
        return;
    const size_t chunk = 64 * MiB;
    CUstream s1, s2;
    CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    const std::string m = "host-VMM swap, 64 MiB chunks";
    progress("hostvmm: %s", m.c_str());
    HostVmm v;
    hostvmm_reserve(v, N, chunk);
    add(m + ": first device create+map", "create", N, REF_NONE, hostvmm_create_device(v));
    fill(reinterpret_cast<void*>(v.user), N, 7);
    add(m + ": first host chunk create+map (pinning)", "create", N, REF_NONE,
        hostvmm_create_host(v));
    for (int threads : {2, 4, 8}) {
        hostvmm_release_host(v);
        add(m + ": first host chunk create+map, " + std::to_string(threads) +
                " threads (pinning)",
            "create", N, REF_NONE, hostvmm_create_host_threads(v, threads));
    }
    for (int r = 0; r < o.rounds; ++r) {
        double t = now_s();
        hostvmm_copy(v, true, s1);
        CU(cuStreamSynchronize(s1));
        const double t_copy = now_s() - t;
        add(m + ": copy-out device -> host chunk", "out", N, REF_D2H, t_copy);
        const double t_remap = hostvmm_remap_to_host(v);
        add(m + ": remap to host (unmap, map, access, release)", "free", N, REF_NONE, t_remap);
        add(m + ": swap-out total", "out", N, REF_D2H, t_copy + t_remap);
        // A kernel on the user's address now reads host memory over the bus.
        t = now_s();
        verify(reinterpret_cast<void*>(v.user), N, 7, "hostvmm: read while host-mapped");
        add(m + ": kernel reads host-mapped data", "in", N, REF_H2D, now_s() - t);
        const double t_create = hostvmm_create_device(v);
        add(m + ": remap to device (create, unmap, map, access)", "create", N, REF_NONE, t_create);
        t = now_s();
        hostvmm_copy(v, false, s1);
        CU(cuStreamSynchronize(s1));
        const double t_in = now_s() - t;
        add(m + ": copy-in host chunk -> device", "in", N, REF_H2D, t_in);
        add(m + ": swap-in total", "in", N, REF_H2D, t_in + t_create);
        verify(reinterpret_cast<void*>(v.user), N, 7, "hostvmm: after swap-in");
    }
    flush_results();
    // Bidirectional: A's copy-out while B's copy-in, each to/from its host chunks.
    {
        HostVmm b;
        hostvmm_reserve(b, N, chunk);
        hostvmm_create_device(b);
        hostvmm_create_host(b);
        fill(reinterpret_cast<void*>(b.user), N, 8);
        hostvmm_copy(b, true, s2);  // B's data in its host chunks
        CU(cuStreamSynchronize(s2));
        const std::string mb = "host-VMM bidirectional: A copy-out while B copy-in";
        std::vector<double> alone, both;
        for (int r = 0; r < o.rounds; ++r) {
            double t = now_s();
            hostvmm_copy(v, true, s1);
            CU(cuStreamSynchronize(s1));
            hostvmm_copy(b, false, s2);
            CU(cuStreamSynchronize(s2));
            alone.push_back(now_s() - t);
            t = now_s();
            hostvmm_copy(v, true, s1);
            hostvmm_copy(b, false, s2);
            CU(cuStreamSynchronize(s1));
            CU(cuStreamSynchronize(s2));
            add(mb, "bidir", 2.0 * N, REF_BIDIR, now_s() - t);
        }
        verify(reinterpret_cast<void*>(b.user), N, 8, "hostvmm bidirectional B");
        char ex[120];
        snprintf(ex, sizeof ex, ", \"sum_alone_s\": %.4f", median(alone));
        entry(mb, "bidir", 2.0 * N, REF_BIDIR).extra = ex;
        hostvmm_free(b);
    }
    hostvmm_free(v);
    CU(cuStreamDestroy(s1));
    CU(cuStreamDestroy(s2));
    flush_results();
}

// ---------------------------------------------------------------- B. ring

// Moves n bytes between dev and the pageable buffer through `slots` pinned
// chunks: one host thread and one stream per slot; thread w handles chunks
// w, w+slots, ...: DMA into its slot then memcpy out (or memcpy in then DMA).
static double ring_copy(bool out, CUdeviceptr dev, char* host, size_t n,
                        const std::vector<char*>& slots, size_t slot_bytes,
                        const std::vector<CUstream>& ss)
{
    const size_t nchunks = (n + slot_bytes - 1) / slot_bytes;
    const size_t W = slots.size();
    const double t0 = now_s();
    auto work = [&](size_t w) {
        CU(cuCtxSetCurrent(g_ctx));
        for (size_t i = w; i < nchunks; i += W) {
            const size_t off = i * slot_bytes, len = std::min(slot_bytes, n - off);
            if (out) {
                CU(cuMemcpyDtoHAsync(slots[w], dev + off, len, ss[w]));
                CU(cuStreamSynchronize(ss[w]));
                memcpy(host + off, slots[w], len);
            } else {
                memcpy(slots[w], host + off, len);
                CU(cuMemcpyHtoDAsync(dev + off, slots[w], len, ss[w]));
                CU(cuStreamSynchronize(ss[w]));
            }
        }
    };
    std::vector<std::thread> pool;
    for (size_t w = 1; w < W; ++w)
        pool.emplace_back(work, w);
    work(0);
    for (auto& t : pool)
        t.join();
    return now_s() - t0;
}

static void section_ring(const Options& o)
{
    g_phase = "ring";
    size_t slot = std::min(o.ring_mib * MiB, N / o.ring_slots);
    slot = std::max<size_t>(2 * MiB, slot & ~(2 * MiB - 1));
    progress("ring: %d x %s pinned staging, pageable %s", o.ring_slots, mib_str(slot).c_str(),
             mib_str(N).c_str());
    char* pageable = static_cast<char*>(malloc(N));
    if (!pageable)
        die("malloc(pageable working set)", "out of host memory", __FILE__, __LINE__);
    double t = now_s();
    memset(pageable, 0, N);  // first touch: the kernel allocates the host pages
    add("host: first touch of pageable memory (memset, 1 thread)", "host", N, REF_NONE,
        now_s() - t);
    t = now_s();
    memset(pageable, 1, N);
    add("host: memset of touched pageable memory (1 thread)", "host", N, REF_NONE, now_s() - t);
    std::vector<char*> slots(o.ring_slots);
    for (auto& s : slots)
        CK(cudaMallocHost(reinterpret_cast<void**>(&s), slot));
    std::vector<CUstream> ss(o.ring_slots);
    for (auto& s : ss)
        CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    Vmm v;
    vmm_reserve(v, N, 64 * MiB);
    vmm_create(v);
    void* dp = reinterpret_cast<void*>(v.va);
    fill(dp, N, 6);
    char tag[128];
    snprintf(tag, sizeof tag, "vmm staging ring %d x %zu MiB -> pageable (%d threads)",
             o.ring_slots, slot / MiB, o.ring_slots);
    const std::string m = tag;
    for (int r = 0; r < o.rounds; ++r) {
        add(m + ": copy-out", "out", N, REF_D2H,
            ring_copy(true, v.va, pageable, N, slots, slot, ss));
        CK(cudaMemset(dp, 0, N));
        CK(cudaDeviceSynchronize());
        add(m + ": copy-in", "in", N, REF_H2D,
            ring_copy(false, v.va, pageable, N, slots, slot, ss));
        verify(dp, N, 6, "staging ring");
    }
    flush_results();
    progress("ring: plain cudaMemcpy to/from pageable memory");
    for (int r = 0; r < o.rounds; ++r) {
        t = now_s();
        CK(cudaMemcpy(pageable, dp, N, cudaMemcpyDeviceToHost));
        add("vmm plain cudaMemcpy D2H into pageable (driver staging)", "out", N, REF_D2H,
            now_s() - t);
        CK(cudaMemset(dp, 0, N));
        CK(cudaDeviceSynchronize());
        t = now_s();
        CK(cudaMemcpy(dp, pageable, N, cudaMemcpyHostToDevice));
        add("vmm plain cudaMemcpy H2D from pageable (driver staging)", "in", N, REF_H2D,
            now_s() - t);
        verify(dp, N, 6, "pageable cudaMemcpy");
    }
    vmm_free(v);
    for (auto s : ss)
        CU(cuStreamDestroy(s));
    for (auto s : slots)
        CK(cudaFreeHost(s));
    free(pageable);
    flush_results();
}

// ---------------------------------------------------------------- A. managed

static cudaMemLocation loc_gpu()
{
    cudaMemLocation l;
    l.type = cudaMemLocationTypeDevice;
    l.id = g_dev;
    return l;
}

static cudaMemLocation loc_host()
{
    cudaMemLocation l;
    l.type = cudaMemLocationTypeHost;
    l.id = 0;
    return l;
}

// Prefetches [p, p+bytes) to `where`, split into one piece per stream (2 MiB
// aligned); returns the seconds from the first call to the last sync.
static double prefetch(void* p, size_t bytes, cudaMemLocation where,
                       const std::vector<cudaStream_t>& ss)
{
    const size_t n = ss.size();
    const size_t piece = (bytes / n + 2 * MiB - 1) & ~(2 * MiB - 1);
    const double t0 = now_s();
    for (size_t i = 0; i < n; ++i) {
        const size_t off = i * piece;
        if (off >= bytes)
            break;
        CK(cudaMemPrefetchAsync(static_cast<char*>(p) + off, std::min(piece, bytes - off), where, 0,
                                ss[i]));
    }
    for (auto s : ss)
        CK(cudaStreamSynchronize(s));
    return now_s() - t0;
}

#if HAVE_BATCH_API
struct Batch {
    std::vector<void*> ptrs;
    std::vector<size_t> sizes;
};

static Batch make_batch(void* p, size_t bytes, size_t piece)
{
    Batch b;
    for (size_t off = 0; off < bytes; off += piece) {
        b.ptrs.push_back(static_cast<char*>(p) + off);
        b.sizes.push_back(std::min(piece, bytes - off));
    }
    return b;
}

enum BatchOp { PREFETCH, DISCARD_PREFETCH };

// One batch call over the range; negative if the API is unavailable.
static double batch_op(BatchOp op, void* p, size_t bytes, size_t piece, cudaMemLocation where,
                       cudaStream_t s, const char* mechanism)
{
    if (!g_batch)
        return -1;
    Batch b = make_batch(p, bytes, piece);
    size_t idx = 0;
    const double t0 = now_s();
    cudaError_t e;
    if (op == PREFETCH)
        e = cudaMemPrefetchBatchAsync(b.ptrs.data(), b.sizes.data(), b.ptrs.size(), &where, &idx, 1,
                                      0, s);
    else
        e = cudaMemDiscardAndPrefetchBatchAsync(b.ptrs.data(), b.sizes.data(), b.ptrs.size(),
                                                &where, &idx, 1, 0, s);
    if (!soft(e,
              op == PREFETCH ? "cudaMemPrefetchBatchAsync" : "cudaMemDiscardAndPrefetchBatchAsync",
              mechanism))
        return -1;
    CK(cudaStreamSynchronize(s));
    return now_s() - t0;
}
#endif

static void section_managed(const Options& o)
{
    g_phase = "managed";
    int cma = 0;
    CK(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, g_dev));
    if (!cma) {
        printf(
            "{\"mechanism\": \"managed\", \"skipped\": \"concurrentManagedAccess is 0: no "
            "prefetch to the device\"}\n");
        return;
    }
    const cudaMemLocation gpu = loc_gpu(), host = loc_host();
    std::vector<cudaStream_t> many(o.streams);
    for (auto& s : many)
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const std::vector<cudaStream_t> one{many[0]};
    char sn[32];
    snprintf(sn, sizeof sn, "%d streams", o.streams);
    const size_t bpiece = o.batch_mib * MiB;
    char bn[64];
    snprintf(bn, sizeof bn, "%zu x %zu MiB", (N + bpiece - 1) / bpiece, o.batch_mib);

    // 1. Fresh buffer each round: first placement, first eviction, swap-in,
    //    repeated eviction, stream/batch/fault/discard variants, free.
    for (int r = 0; r < o.rounds; ++r) {
        progress("managed: main sequence, round %d/%d", r + 1, o.rounds);
        void* p;
        CK(cudaMallocManaged(&p, N));
        add("managed prefetch to GPU: first placement (never touched)", "place", N, REF_H2D,
            prefetch(p, N, gpu, one), true);
        fill(p, N, 7, one[0]);
        add("managed prefetch to CPU: evict, first time (host pages new)", "out", N, REF_D2H,
            prefetch(p, N, host, one), true);
        add("managed prefetch to GPU: swap-in", "in", N, REF_H2D, prefetch(p, N, gpu, one), true);
        verify(p, N, 7, "managed swap-in");
        add("managed prefetch to CPU: evict again (was evicted before)", "out", N, REF_D2H,
            prefetch(p, N, host, one), true);
        add("managed prefetch to GPU: swap-in", "in", N, REF_H2D, prefetch(p, N, gpu, one), true);
        add(std::string("managed prefetch to CPU: evict again, ") + sn, "out", N, REF_D2H,
            prefetch(p, N, host, many), true);
        add(std::string("managed prefetch to GPU: swap-in, ") + sn, "in", N, REF_H2D,
            prefetch(p, N, gpu, many), true);
        verify(p, N, 7, "managed swap-in, streams");
#if HAVE_BATCH_API
        {
            const std::string mb = std::string("managed cudaMemPrefetchBatchAsync ") + bn;
            const double to =
                batch_op(PREFETCH, p, N, bpiece, host, one[0], (mb + ": evict").c_str());
            if (to >= 0) {
                add(mb + ": evict again", "out", N, REF_D2H, to, true);
                const double ti =
                    batch_op(PREFETCH, p, N, bpiece, gpu, one[0], (mb + ": swap-in").c_str());
                if (ti >= 0)
                    add(mb + ": swap-in", "in", N, REF_H2D, ti, true);
                else
                    prefetch(p, N, gpu, one);
                verify(p, N, 7, "managed batch swap-in");
            }
        }
#endif
        // Fault-driven swap-in: evict, then a kernel reads one byte per 4 KiB.
        add("managed prefetch to CPU: evict again (was evicted before)", "out", N, REF_D2H,
            prefetch(p, N, host, one), true);
        {
            const double t = now_s();
            touch_read<<<2048, 256, 0, one[0]>>>(static_cast<const char*>(p), N, g_sink);
            KCHECK();
            CK(cudaStreamSynchronize(one[0]));
            add("managed fault-driven swap-in (kernel reads 1 B / 4 KiB)", "in", N, REF_H2D,
                now_s() - t, true);
        }
        verify(p, N, 7, "managed fault-driven swap-in");
#if HAVE_BATCH_API
        {
            const std::string md = "managed cudaMemDiscardAndPrefetchBatchAsync";
            const double to = batch_op(DISCARD_PREFETCH, p, N, bpiece, host, one[0],
                                       (md + " to CPU (content dropped)").c_str());
            if (to >= 0) {
                add(md + " to CPU of resident data (content dropped)", "out", N, REF_D2H, to, true);
                const double ti =
                    batch_op(DISCARD_PREFETCH, p, N, bpiece, gpu, one[0], (md + " to GPU").c_str());
                if (ti >= 0)
                    add(md + " to GPU of evicted data (placement, no copy)", "place", N, REF_H2D,
                        ti, true);
            }
        }
#endif
        CK(cudaDeviceSynchronize());
        const double t = now_s();
        CK(cudaFree(p));
        add("managed cudaFree (resident on GPU, host pages allocated before)", "free", N, REF_NONE,
            now_s() - t, true);
    }
    flush_results();

    // 2. First placement by faults, and by discard+prefetch, of never-touched memory.
    for (int r = 0; r < o.rounds; ++r) {
        progress("managed: first placement variants, round %d/%d", r + 1, o.rounds);
        void* p;
        CK(cudaMallocManaged(&p, N));
        double t = now_s();
        touch_write<<<2048, 256, 0, one[0]>>>(static_cast<char*>(p), N);
        KCHECK();
        CK(cudaStreamSynchronize(one[0]));
        add("managed fault-driven first placement (kernel writes 1 B / 4 KiB)", "place", N, REF_H2D,
            now_s() - t, true);
        CK(cudaFree(p));
#if HAVE_BATCH_API
        CK(cudaMallocManaged(&p, N));
        const std::string md = "managed cudaMemDiscardAndPrefetchBatchAsync to GPU";
        t = batch_op(DISCARD_PREFETCH, p, N, bpiece, gpu, one[0],
                     (md + ", first placement").c_str());
        if (t >= 0)
            add(md + ": first placement (never touched)", "place", N, REF_H2D, t, true);
        CK(cudaFree(p));
        CK(cudaMallocManaged(&p, N));
        t = batch_op(PREFETCH, p, N, bpiece, gpu, one[0],
                     "managed cudaMemPrefetchBatchAsync, first placement");
        if (t >= 0)
            add(std::string("managed cudaMemPrefetchBatchAsync ") + bn +
                    ": first placement (never touched)",
                "place", N, REF_H2D, t, true);
        CK(cudaFree(p));
#endif
    }
    flush_results();

    // 3. Advice: preferred location CPU + accessed by GPU, set before placement.
    for (int r = 0; r < o.rounds; ++r) {
        progress("managed: advised (preferred CPU + accessed-by GPU), round %d/%d", r + 1,
                 o.rounds);
        const std::string m = "managed advised (preferred CPU, accessed-by GPU)";
        void* p;
        CK(cudaMallocManaged(&p, N));
        CK(cudaMemAdvise(p, N, cudaMemAdviseSetPreferredLocation, host));
        CK(cudaMemAdvise(p, N, cudaMemAdviseSetAccessedBy, gpu));
        add(m + ": first placement on GPU", "place", N, REF_H2D, prefetch(p, N, gpu, one), true);
        fill(p, N, 8, one[0]);
        add(m + ": evict, first time", "out", N, REF_D2H, prefetch(p, N, host, one), true);
        add(m + ": swap-in", "in", N, REF_H2D, prefetch(p, N, gpu, one), true);
        verify(p, N, 8, "managed advised swap-in");
        add(m + ": evict again", "out", N, REF_D2H, prefetch(p, N, host, one), true);
        add(m + ": swap-in", "in", N, REF_H2D, prefetch(p, N, gpu, one), true);
        verify(p, N, 8, "managed advised swap-in");
        CK(cudaDeviceSynchronize());
        CK(cudaFree(p));
    }
    flush_results();

    // 4. Bidirectional: A evicted while B swapped in, from two host threads.
    {
        progress("managed: bidirectional, A evict while B swap-in");
        const std::string m =
            "managed bidirectional: A evict while B swap-in (2 streams, 2 threads)";
        void *a, *b;
        CK(cudaMallocManaged(&a, N));
        CK(cudaMallocManaged(&b, N));
        cudaStream_t s1 = many[0], s2;
        CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        const std::vector<cudaStream_t> v1{s1}, v2{s2};
        prefetch(a, N, gpu, v1);
        prefetch(b, N, gpu, v1);
        fill(a, N, 9, s1);
        fill(b, N, 10, s1);
        prefetch(a, N, host, v1);  // both have been evicted once: host pages allocated before
        prefetch(a, N, gpu, v1);
        prefetch(b, N, host, v1);
        std::vector<double> alone_out, alone_in, sum, mx;
        for (int r = 0; r < o.rounds; ++r) {
            // state: A on GPU, B on host
            const double to = prefetch(a, N, host, v1);
            const double ti = prefetch(b, N, gpu, v2);
            // state: A on host, B on GPU; now B out while A in
            const double t0 = now_s();
            std::thread th([&] {
                CK(cudaSetDevice(g_dev));
                prefetch(b, N, host, v1);
            });
            prefetch(a, N, gpu, v2);
            th.join();
            add(m, "bidir", 2.0 * N, REF_BIDIR, now_s() - t0, true);
            alone_out.push_back(to);
            alone_in.push_back(ti);
            sum.push_back(to + ti);
            mx.push_back(std::max(to, ti));
        }
        verify(a, N, 9, "managed bidirectional A");
        char ex[200];
        snprintf(ex, sizeof ex,
                 ", \"alone_out_s\": %.4f, \"alone_in_s\": %.4f, \"sum_alone_s\": %.4f, "
                 "\"max_alone_s\": %.4f",
                 median(alone_out), median(alone_in), median(sum), median(mx));
        entry(m, "bidir", 2.0 * N, REF_BIDIR).extra = ex;
        CK(cudaDeviceSynchronize());
        CK(cudaFree(a));
        CK(cudaFree(b));
        CK(cudaStreamDestroy(s2));
    }
    for (auto s : many)
        CK(cudaStreamDestroy(s));
    flush_results();
}

// ---------------------------------------------------------------- main

int main(int argc, char** argv)
{
    const Options o = parse(argc, argv);
    N = size_t(o.gib * double(1ull << 30)) / (64 * MiB) * (64 * MiB);
    g_dev = o.device;
    g_batch = o.batch;
    g_host_base = host_used_gib();
    progress("start: --gib %.2f (%s), --rounds %d", o.gib, mib_str(N).c_str(), o.rounds);

    g_phase = "init";
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (g_dev < 0 || g_dev >= ndev) {
        fprintf(stderr, "swap_mechanisms: --device %d but %d devices\n", g_dev, ndev);
        return 2;
    }
    CK(cudaSetDevice(g_dev));
    CK(cudaFree(nullptr));  // creates the primary context
    CU(cuInit(0));
    CU(cuCtxGetCurrent(&g_ctx));
    CU(cuDeviceGet(&g_cudev, g_dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, g_dev));
    int drv = 0, rt = 0, cma = 0, pma = 0, vmm = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, g_dev));
    CK(cudaDeviceGetAttribute(&pma, cudaDevAttrPageableMemoryAccess, g_dev));
    CU(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                            g_cudev));
    size_t fr = 0, tot = 0;
    CK(cudaMemGetInfo(&fr, &tot));
    const double host_total =
        double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE)) / double(1ull << 30);
    printf(
        "{\"device\": \"%s\", \"total_gib\": %.2f, \"free_gib\": %.2f, \"driver\": %d, "
        "\"runtime\": %d, \"concurrent_managed_access\": %d, \"pageable_memory_access\": %d, "
        "\"vmm_supported\": %d, \"host_ram_gib\": %.1f, \"working_set_bytes\": %zu, "
        "\"rounds\": %d, \"batch_api\": %d}\n",
        prop.name, tot / double(1ull << 30), fr / double(1ull << 30), drv, rt, cma, pma, vmm,
        host_total, N, o.rounds, HAVE_BATCH_API);
    printf("# %s, %.1f GiB total (%.1f GiB free), driver %d, runtime %d, host RAM %.1f GiB\n",
           prop.name, tot / double(1ull << 30), fr / double(1ull << 30), drv, rt, host_total);
    fflush(stdout);

    // Bounds: 2 x N on the GPU at most (plus small buffers), 2 x N pinned,
    // 2 x N pageable (managed pages evicted to the host) at most at once.
    if (fr < 2 * N + 512 * MiB) {
        fprintf(stderr,
                "swap_mechanisms: %.2f GiB free on the GPU, need 2 x %.2f GiB + 0.5: use a "
                "smaller --gib\n",
                fr / double(1ull << 30), N / double(1ull << 30));
        return 2;
    }
    if (host_total < 2.0 * N / double(1ull << 30) + 8) {
        fprintf(stderr, "swap_mechanisms: %.1f GiB of host RAM is too little for --gib %.2f\n",
                host_total, o.gib);
        return 2;
    }
    CK(cudaMalloc(&g_bad, sizeof *g_bad));
    CK(cudaMalloc(&g_sink, sizeof *g_sink));

    const double t_start = now_s();
    if (has_section(o, "bus") || has_section(o, "vmm")) {
        g_phase = "pinned host allocation";
        progress("allocating 2 x %s pinned host memory", mib_str(N).c_str());
        char *hostA, *hostB;
        CK(cudaMallocHost(reinterpret_cast<void**>(&hostA), N));
        CK(cudaMallocHost(reinterpret_cast<void**>(&hostB), N));
        if (has_section(o, "bus"))
            section_bus(o, hostA, hostB);
        if (has_section(o, "vmm")) {
            if (vmm)
                section_vmm(o, hostA, hostB);
            else
                printf("{\"mechanism\": \"vmm\", \"skipped\": \"VMM not supported\"}\n");
        }
        g_phase = "pinned host free";
        CK(cudaFreeHost(hostA));
        CK(cudaFreeHost(hostB));
    }
    if (has_section(o, "hostvmm") && vmm)
        section_hostvmm(o);
    if (has_section(o, "ring") && vmm)
        section_ring(o);
    if (has_section(o, "managed"))
        section_managed(o);

    g_phase = "teardown";
    CK(cudaFree(g_bad));
    CK(cudaFree(g_sink));
    print_table();
    printf("# %s, working set %s, median of %d rounds, total %.1f s%s\n", prop.name,
           mib_str(N).c_str(), o.rounds, now_s() - t_start,
           g_verify_failures ? ", DATA MISMATCHES (see verify_failed lines)" : "");
    progress("done");
    return g_verify_failures ? 2 : 0;
}
