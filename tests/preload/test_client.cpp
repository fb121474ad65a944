// A small CUDA driver-API program for the end-to-end tests: it reaches the
// (fake) driver through the route it is told to, allocates, launches
// "kernels" of a given duration, copies, captures a graph, forks, ... and
// reports what the driver answered on stdout (key=value lines).
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "api.h"

namespace {

struct Options {
    std::string route = "direct";
    bool per_thread = false;
    int kernels = 5;
    // --kernel-us: how long each kernel runs (most tests use this default).
    uint32_t kernel_us = 20000;
    bool launch_ex = false;
    bool own_stream = false;
    bool graph = false;
    bool copies = false;
    bool meminfo = false;
    bool meminfo_after_work = false;  // once the first round ran (the lock was granted)
    bool prefetch = false;
    bool fork_child = false;
    bool free_at_end = true;
    size_t alloc = 0;
    int allocs = 1;
    size_t managed = 0;
    size_t async_alloc = 0;
    size_t vmm = 0;
    bool ipc = false;
    std::string gpudirect;  // --gpudirect dmabuf,p2p,rdma: see gpudirect()
    bool contextless = false;
    bool arrays = false;      // --arrays: 18.25 MiB of arrays, kept
    size_t vmm_retained = 0;  // --vmm-retained SIZE: see vmm_retained()
    size_t graph_memory = 0;  // --graph-memory SIZE: see graph_memory()
    bool deprecated = false;
    bool failed_captures = false;
    bool free_during_capture = false;  // --free-during-capture: see free_during_capture()
    std::string wait_flag;             // --wait-flag: see flag_wait()
    // --alloc-while-flag-waits SIZE: with --wait-flag, an allocation of SIZE,
    // set and read back, between the wait and the write (see flag_wait()).
    size_t alloc_while_flag_waits = 0;
    std::string barrier;
    // --until FILE: after the rounds, more rounds until FILE exists (each
    // after a pause of --pause-ms).
    std::string until;
    // --pause-until FILE: after the first round, a CPU phase (GPU idle)
    // until FILE exists, before the rounds that follow and the checks.
    std::string pause_until;
    // --busy-until FILE: after the first round, rounds back to back (the GPU
    // never idle) until FILE exists, before the rounds that follow.
    std::string busy_until;
    // --peer-kernel: each round ends with a kernel on GPU 1 (peer access
    // from GPU 1 to GPU 0 enabled before the first) that touches every
    // allocation, on GPU 0; prints peer=ok, else peer=error:CODE (the
    // first failure; later rounds then skip it). --peer-disable: access is
    // disabled again after the first round's kernel.
    bool peer_kernel = false;
    // --attrs: the last allocation's pointer attributes (at its last byte)
    // after allocating, after --pause-until and at the end; see attrs().
    bool attrs = false;
    // --free-async: at the end, every allocation is freed with
    // cuMemFreeAsync on the default stream; prints free-async=ok or the
    // first error.
    bool free_async = false;
    // --fault-then-alloc: after the first allocations, a kernel touches
    // reserved address space with nothing mapped (an illegal address: the
    // context is lost), then a 64 MiB allocation; prints
    // fault=CODE alloc-after-fault=CODE and exits 0.
    bool fault_then_alloc = false;
    // --fault-then-free: after the first allocations, the same fault, then
    // the first allocation is freed; prints fault=CODE free-after-fault=CODE
    // and exits 0.
    bool fault_then_free = false;
    // --graph-memset-node: after --pause-until, a graph with one memset node
    // (0x5a) on the last allocation is made, launched and waited for, and
    // its first byte read back; prints graph-node=CODE graph-run=CODE
    // byte=HEX.
    bool graph_memset_node = false;
    bool peer_disable = false;
    std::string dlopen_copy;  // another libnvshare.so to dlopen and call into first
    int hold_ms = 0;
    // --escape-after-alloc: right after each --alloc (and --alloc-each-round)
    // allocation, a memset of it that
    // passes no gate (the fake's fakecuda_escape_memset): "escape=RESULT"
    // and "alloc_ms=N", how long the allocation took.
    bool escape_after_alloc = false;
    // --touch: the kernels of the rounds read and write every page of each
    // --alloc as they run (the fake's kTouchKernel), so that memory moved
    // under them faults.
    bool touch = false;
    // --capture-until FILE: in the first round, the kernels are queued
    // behind a wait for a flag, then a stream capture on a stream of its own
    // begins ("capturing=ok"; while it runs nothing may synchronise) and
    // lasts until FILE exists; then the flag is written and the kernels run.
    std::string capture_until;
    int rounds = 1;
    int pause_ms = 0;
    // --pauses-until PREFIX: the pause before round N (N = 1, 2, ... of
    // --rounds) lasts until PREFIX.N exists, instead of --pause-ms.
    std::string pauses_until;
    // --alloc-each-round SIZE: each of the --rounds after the first begins
    // with one more allocation of SIZE (kept), right before its kernels.
    size_t alloc_each_round = 0;
    // --load-each-round: each of the --rounds after the first begins by
    // asking for its kernel's attributes (cuFuncGetAttribute), where a driver
    // loads a kernel at its first use.
    bool load_each_round = false;
    // --check-data: each --alloc allocation gets a pattern (written once the
    // GPU is granted) that is read back and compared at the end: whatever
    // moved the memory meanwhile must have kept it ("data=ok").
    bool check_data = false;
    // --late-alloc SIZE: once the first round ran (the GPU granted), one more
    // allocation, given a pattern and read back at once ("late=ok").
    size_t late_alloc = 0;
    std::string late_alloc_after;  // --late-alloc-after FILE: it waits for FILE first
    // --fail-late-alloc CALL:ERROR: right before the late allocation, the
    // fake driver is asked to fail the next CALL (cuMemCreate, cuMemMap or
    // cuMemSetAccess) with ERROR (fakecuda_fail_next); an allocation that
    // then fails otherwise than out of memory prints late=error:CODE.
    std::string fail_late_alloc;
    // --fail-first-alloc CALL:ERROR: the same, right before the --alloc
    // allocations, which come before the process holds the GPU: their memory
    // is placed at the grant, by the client thread.
    std::string fail_first_alloc;
    // --late-stream: after the late allocation, a new stream and a memset on
    // it ("late-stream=ok", or "late-stream=oom": the device was full).
    bool late_stream = false;
    // --free-first: right after the late allocation, the first --alloc
    // allocation is freed (its room on the GPU appears while the process
    // holds the lock); the late allocation is read back once more at the
    // end ("late-end=ok").
    bool free_first = false;
    // --free-middle: after the patterns are written (--check-data), the
    // middle --alloc allocation is freed and allocated again (the same
    // size: it may land where the freed one was), and the new one filled
    // with 0xa5 and read back ("refill=ok"); the neighbours' patterns are
    // checked at the end as usual.
    bool free_middle = false;
    // --release-primary-when FILE: after its work, once FILE exists, the
    // primary context is released as cudart's exit handler does, while the
    // library may still be moving memory out after letting go
    // ("primary-release-called-ns=": when it called, CLOCK_MONOTONIC); the
    // process then lives 1 s more (an exit takes a while) and frees nothing.
    std::string release_primary_when;
};

Api api;
Options opt;
CUstream stream = nullptr;
CUdevice device = 0;
CUcontext context = nullptr;
std::vector<CUdeviceptr> pointers;

[[noreturn]] void fail(const char* what, CUresult r)
{
    printf("error=%s:%d\n", what, static_cast<int>(r));
    fflush(stdout);
    _exit(3);
}

#define CHECK(call)                 \
    do {                            \
        const CUresult r_ = (call); \
        if (r_ != CUDA_SUCCESS)     \
            fail(#call, r_);        \
    } while (0)

bool exists(const std::string& path)
{
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

void wait_for(const std::string& path)
{
    for (int i = 0; i < 60000 && !exists(path); ++i)
        usleep(1000);
}

CUcontext peer_context();

void setup()
{
    CHECK(api.init(0));
    CHECK(api.device_get(&device, 0));
    if (opt.peer_kernel)
        peer_context();  // first: the process starts on both GPUs
    CHECK(api.primary_retain(&context, device));
    CHECK(api.ctx_set_current(context));
    if (opt.own_stream || opt.graph || !opt.wait_flag.empty() || opt.contextless ||
        opt.graph_memory != 0)
        CHECK(api.stream_create(&stream, 0));
}

void sync_stream()
{
    CHECK(api.stream_synchronize(stream));
}

void launch_on(CUstream s, uint32_t us)
{
    void* params[] = {&us};
    CHECK(api.launch_kernel(reinterpret_cast<CUfunction>(1), 1, 1, 1, 1, 1, 1, 0, s, params,
                            nullptr));
}

// One of each deprecated launch (cuLaunch and cuLaunchGrid on the default
// stream; their kernels take FAKECUDA_KERNEL_US on the fake).
void launch_deprecated(uint32_t us)
{
    auto f = reinterpret_cast<CUfunction>(1);
    CHECK(api.launch_old(f));
    CHECK(api.launch_grid(f, 1, 1));
    CHECK(api.launch_grid_async(f, 1, 1, stream));
    void* params[] = {&us};
    CUDA_LAUNCH_PARAMS p{};
    p.function = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.hStream = stream;
    p.kernelParams = params;
    CHECK(api.launch_multi_device(&p, 1, 0));
}

void launch(uint32_t us)
{
    if (opt.touch) {
        auto f = reinterpret_cast<CUfunction>(2);  // the fake's kTouchKernel
        for (const CUdeviceptr p : pointers) {
            CUdeviceptr at = p;
            uint64_t bytes = opt.alloc;
            void* params[] = {&us, &at, &bytes};
            CHECK(api.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
        }
        return;
    }
    if (opt.deprecated) {
        launch_deprecated(us);
        return;
    }
    void* params[] = {&us};
    auto f = reinterpret_cast<CUfunction>(1);
    if (opt.launch_ex) {
        CUlaunchConfig cfg{};
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = stream;
        CHECK(api.launch_kernel_ex(&cfg, f, params, nullptr));
    } else {
        CHECK(api.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    }
}

// GPUDirect RDMA on a fresh allocation (an address inside it, as MPI and
// UCX pass their buffers), each path named in opt.gpudirect once:
// dma-buf export, nvidia-peermem's tokens, the RDMA-capable attribute
// (through cuPointerGetAttributes). Prints what the driver answered.
void gpudirect(CUdeviceptr p)
{
    const CUdeviceptr inside = p + opt.alloc / 2;
    auto result = [](CUresult r) {
        return r == CUDA_SUCCESS ? std::string("ok") : "error:" + std::to_string(r);
    };
    if (opt.gpudirect.find("dmabuf") != std::string::npos) {
        int fd = -1;
        const CUresult r = api.mem_get_handle_for_range(&fd, inside, opt.alloc / 2,
                                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
        printf("dmabuf=%s\n", result(r).c_str());
        if (r == CUDA_SUCCESS)
            close(fd);
    }
    if (opt.gpudirect.find("p2p") != std::string::npos) {
        CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens{};
        const CUresult r =
            api.pointer_get_attribute(&tokens, CU_POINTER_ATTRIBUTE_P2P_TOKENS, inside);
        printf("p2p=%s\n", result(r).c_str());
    }
    if (opt.gpudirect.find("rdma") != std::string::npos) {
        unsigned int capable = 2, managed = 2;
        CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                       CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE};
        void* data[] = {&managed, &capable};
        const CUresult r = api.pointer_get_attributes(2, attrs, data, inside);
        printf("rdma=%s:%u\n", result(r).c_str(), capable);
    }
}

// The pattern of allocation `index` at word `w`: differs per word and per
// allocation, so chunks swapped with each other or with another allocation's
// show. It is written and checked by the two functions below, which
// ThreadSanitizer leaves uninstrumented: hundreds of MiB a run, where checking
// this single-threaded program's own buffers made the swap engine's tests
// minutes slower and what TSan must check is libnvshare.so.
__attribute__((no_sanitize("thread"))) uint64_t pattern(size_t index, size_t w)
{
    return (w * 0x9E3779B97F4A7C15ull) ^ (index + 1) * 0xD1B54A32D192ED03ull;
}

__attribute__((no_sanitize("thread"))) void fill_pattern(uint64_t* words, size_t n, size_t index)
{
    for (size_t w = 0; w < n; ++w)
        words[w] = pattern(index, w);
}

// The first word of words[0, n) that is not the pattern, or n.
__attribute__((no_sanitize("thread"))) size_t first_mismatch(const uint64_t* words, size_t n,
                                                             size_t index)
{
    size_t w = 0;
    while (w < n && words[w] == pattern(index, w))
        ++w;
    return w;
}

void free_middle()
{
    if (pointers.size() < 3)
        return;
    CUdeviceptr& middle = pointers[pointers.size() / 2];
    CHECK(api.mem_free(middle));
    middle = 0;  // skipped by the checks
    CUdeviceptr p = 0;
    CHECK(api.mem_alloc(&p, opt.alloc));
    CHECK(api.memset_d8(p, 0xa5, opt.alloc));
    std::vector<unsigned char> back(opt.alloc);
    CHECK(api.memcpy_dtoh(back.data(), p, opt.alloc));
    const bool ok =
        std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 0xa5; });
    printf("refill=%s\n", ok ? "ok" : "corrupt");
    fflush(stdout);
}

void write_patterns()
{
    for (size_t i = 0; i < pointers.size() && i < static_cast<size_t>(opt.allocs); ++i) {
        const size_t n = opt.alloc / 8;
        auto words = std::make_unique_for_overwrite<uint64_t[]>(n);
        fill_pattern(words.get(), n, i);
        CHECK(api.memcpy_htod(pointers[i], words.get(), n * 8));
    }
}

void check_patterns()
{
    for (size_t i = 0; i < pointers.size() && i < static_cast<size_t>(opt.allocs); ++i) {
        if (pointers[i] == 0)
            continue;  // freed (--free-middle)
        const size_t n = opt.alloc / 8;
        auto words = std::make_unique_for_overwrite<uint64_t[]>(n);
        CHECK(api.memcpy_dtoh(words.get(), pointers[i], n * 8));
        if (const size_t w = first_mismatch(words.get(), n, i); w != n) {
            printf("data=corrupt allocation %zu offset %zu\n", i, w * 8);
            return;
        }
    }
    printf("data=ok\n");
}

CUdeviceptr late_pointer = 0;

// Whether the late allocation holds its pattern.
bool late_pattern_ok(const char* what)
{
    const size_t n = opt.late_alloc / 8;
    auto words = std::make_unique_for_overwrite<uint64_t[]>(n);
    CHECK(api.memcpy_dtoh(words.get(), late_pointer, n * 8));
    if (const size_t w = first_mismatch(words.get(), n, 1000); w != n) {
        printf("%s=corrupt offset %zu\n", what, w * 8);
        return false;
    }
    printf("%s=ok\n", what);
    return true;
}

// A kernel that touches reserved address space with nothing mapped: an
// illegal address, which loses the context. The launch's or the
// synchronisation's answer.
CUresult provoke_fault()
{
    CUdeviceptr hole = 0;
    CHECK(api.mem_address_reserve(&hole, 2u << 20, 0, 0, 0));
    auto f = reinterpret_cast<CUfunction>(2);  // the fake's kTouchKernel
    uint32_t us = 10;
    uint64_t bytes = 4096;
    void* params[] = {&us, &hole, &bytes};
    CUresult fault = api.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
    if (fault == CUDA_SUCCESS)
        fault = api.ctx_synchronize();
    return fault;
}

void fault_then_alloc()
{
    const CUresult fault = provoke_fault();
    CUdeviceptr p = 0;
    const CUresult after = api.mem_alloc(&p, 64u << 20);
    printf("fault=%d alloc-after-fault=%d\n", static_cast<int>(fault), static_cast<int>(after));
    fflush(stdout);
}

void fault_then_free()
{
    const CUresult fault = provoke_fault();
    const CUresult freed = pointers.empty() ? CUDA_ERROR_NOT_READY : api.mem_free(pointers.front());
    printf("fault=%d free-after-fault=%d\n", static_cast<int>(fault), static_cast<int>(freed));
    fflush(stdout);
}

// Asks the fake driver to fail the next call named by `spec` (CALL:ERROR).
void fail_next_vmm_call(const std::string& spec)
{
    const size_t colon = spec.find(':');
    const std::string call = spec.substr(0, colon);
    const int error = colon == std::string::npos ? 0 : atoi(spec.c_str() + colon + 1);
    using FailNext = CUresult (*)(const char*, CUresult);
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto fn = driver != nullptr ? reinterpret_cast<FailNext>(dlsym(driver, "fakecuda_fail_next"))
                                : nullptr;
    CHECK(fn != nullptr ? fn(call.c_str(), static_cast<CUresult>(error)) : CUDA_ERROR_NOT_FOUND);
}

void graph_memset_node()
{
    CUgraph g = nullptr;
    CHECK(api.graph_create(&g, 0));
    CUDA_MEMSET_NODE_PARAMS params{};
    params.dst = pointers.back();
    params.elementSize = 1;
    params.width = opt.alloc;
    params.height = 1;
    params.value = 0x5a;
    CUgraphNode node = nullptr;
    const CUresult added = api.graph_add_memset_node(&node, g, nullptr, 0, &params, context);
    CUresult ran = CUDA_ERROR_NOT_READY;  // not run
    unsigned char byte = 0;
    if (added == CUDA_SUCCESS) {
        CUgraphExec exec = nullptr;
        ran = api.graph_instantiate(&exec, g, 0);
        if (ran == CUDA_SUCCESS)
            ran = api.graph_launch(exec, stream);
        if (ran == CUDA_SUCCESS)
            ran = api.stream_synchronize(stream);
        if (ran == CUDA_SUCCESS)
            ran = api.memcpy_dtoh(&byte, pointers.back() + opt.alloc - 1, 1);
        if (exec != nullptr)
            CHECK(api.graph_exec_destroy(exec));
    }
    CHECK(api.graph_destroy(g));
    printf("graph-node=%d graph-run=%d byte=%02x\n", static_cast<int>(added), static_cast<int>(ran),
           byte);
    fflush(stdout);
}

void late_alloc()
{
    CUdeviceptr p = 0;
    if (!opt.fail_late_alloc.empty())
        fail_next_vmm_call(opt.fail_late_alloc);
    if (const CUresult r = api.mem_alloc(&p, opt.late_alloc); r == CUDA_ERROR_OUT_OF_MEMORY) {
        printf("late=oom\n");
        fflush(stdout);
        return;
    } else if (r != CUDA_SUCCESS && !opt.fail_late_alloc.empty()) {
        printf("late=error:%d\n", static_cast<int>(r));
        fflush(stdout);
        return;
    } else {
        CHECK(r);
    }
    const size_t n = opt.late_alloc / 8;
    auto words = std::make_unique_for_overwrite<uint64_t[]>(n);
    fill_pattern(words.get(), n, 1000);
    CHECK(api.memcpy_htod(p, words.get(), n * 8));
    late_pointer = p;
    late_pattern_ok("late");
    if (opt.free_first && !pointers.empty()) {
        CHECK(api.mem_free(pointers.front()));
        pointers.erase(pointers.begin());
    }
    pointers.push_back(p);
}

void late_stream()
{
    CUstream s = nullptr;
    if (const CUresult r = api.stream_create(&s, 0); r == CUDA_ERROR_OUT_OF_MEMORY) {
        printf("late-stream=oom\n");
        fflush(stdout);
        return;
    } else {
        CHECK(r);
    }
    CHECK(api.memset_d8_async(late_pointer, 0x7e, 4096, s));
    CHECK(api.stream_synchronize(s));
    CHECK(api.stream_destroy(s));
    printf("late-stream=ok\n");
    fflush(stdout);
}

// Work on a new allocation that passes no gate, at once: it finds memory
// mapped only if the allocation returned none without it.
void escape(CUdeviceptr p, std::chrono::steady_clock::time_point began, size_t bytes)
{
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - began);
    using Escape = CUresult (*)(CUdeviceptr, unsigned char, size_t);
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto fn = driver != nullptr ? reinterpret_cast<Escape>(dlsym(driver, "fakecuda_escape_memset"))
                                : nullptr;
    const CUresult r = fn != nullptr ? fn(p, 0x5a, bytes) : CUDA_ERROR_NOT_FOUND;
    printf("escape=%d alloc_ms=%lld\n", static_cast<int>(r), static_cast<long long>(took.count()));
    fflush(stdout);
}

void allocate()
{
    if (!opt.fail_first_alloc.empty())
        fail_next_vmm_call(opt.fail_first_alloc);
    for (int i = 0; opt.alloc != 0 && i < opt.allocs; ++i) {
        CUdeviceptr p = 0;
        const auto began = std::chrono::steady_clock::now();
        const CUresult r = api.mem_alloc(&p, opt.alloc);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            printf("alloc=oom\n");
            continue;
        }
        CHECK(r);
        printf("alloc=ok\n");
        if (opt.escape_after_alloc)
            escape(p, began, opt.alloc);
        pointers.push_back(p);
        if (!opt.gpudirect.empty())
            gpudirect(p);
        if (opt.ipc) {
            CUipcMemHandle handle;
            const CUresult e = api.ipc_get_mem_handle(&handle, p);
            printf("ipc=%s\n", e == CUDA_SUCCESS ? "ok" : "error");
        }
    }
    if (opt.managed != 0) {
        CUdeviceptr p = 0;
        CHECK(api.mem_alloc_managed(&p, opt.managed, CU_MEM_ATTACH_GLOBAL));
        pointers.push_back(p);
    }
    if (opt.async_alloc != 0) {
        CUdeviceptr p = 0;
        const CUresult r = api.mem_alloc_async(&p, opt.async_alloc, stream);
        printf("async_alloc=%s\n", r == CUDA_SUCCESS               ? "ok"
                                   : r == CUDA_ERROR_OUT_OF_MEMORY ? "oom"
                                                                   : "error");
        if (r == CUDA_SUCCESS) {
            sync_stream();
            CHECK(api.mem_free_async(p, stream));
            sync_stream();
        }
    }
    if (opt.vmm != 0) {
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = device;
        CUmemGenericAllocationHandle h = 0;
        const CUresult r = api.mem_create(&h, opt.vmm, &prop, 0);
        printf("vmm=%s\n", r == CUDA_SUCCESS               ? "ok"
                           : r == CUDA_ERROR_OUT_OF_MEMORY ? "oom"
                                                           : "error");
    }
}

void meminfo()
{
    size_t free = 0, total = 0, device_total = 0;
    CHECK(api.mem_get_info(&free, &total));
    CHECK(api.device_total_mem(&device_total, device));
    printf("free=%zu\ntotal=%zu\ndevice_total=%zu\n", free, total, device_total);
}

void copies()
{
    CUdeviceptr p = 0;
    CHECK(api.mem_alloc(&p, 4096));
    std::vector<unsigned char> in(4096), out(4096, 0);
    for (size_t i = 0; i < in.size(); ++i)
        in[i] = static_cast<unsigned char>(i * 7);
    CHECK(api.memcpy_htod(p, in.data(), in.size()));
    CHECK(api.memcpy_dtoh(out.data(), p, out.size()));
    if (in != out) {
        printf("error=copy mismatch\n");
        _exit(4);
    }
    CHECK(api.memset_d8(p, 0x5a, 4096));
    CHECK(api.memcpy_dtoh(out.data(), p, 16));
    if (out[0] != 0x5a || out[15] != 0x5a) {
        printf("error=memset mismatch\n");
        _exit(4);
    }
    CHECK(api.memcpy_htod_async(p, in.data(), 4096, stream));
    sync_stream();
    CHECK(api.mem_free(p));
    printf("copies=ok\n");
}

// Instantiates, launches and waits for `g`, then destroys both.
void launch_once(CUgraph g)
{
    CUgraphExec exec = nullptr;
    CHECK(api.graph_instantiate(&exec, g, 0));
    CHECK(api.graph_launch(exec, stream));
    sync_stream();
    CHECK(api.graph_exec_destroy(exec));
    CHECK(api.graph_destroy(g));
}

void graph()
{
    CHECK(api.begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < opt.kernels; ++i)
        launch(opt.kernel_us);
    CUgraph g = nullptr;
    CHECK(api.end_capture(stream, &g));
    printf("captured=ok\n");
    fflush(stdout);
    launch_once(g);
}

// Graph memory of `opt.graph_memory` bytes both ways a program makes it: a
// stream-ordered allocation inside a capture, and an allocation node added
// by hand. Each graph is launched once (the pool then holds the memory).
void graph_memory()
{
    CHECK(api.begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr p = 0;
    CHECK(api.mem_alloc_async(&p, opt.graph_memory, stream));
    CHECK(api.mem_free_async(p, stream));
    CUgraph captured = nullptr;
    CHECK(api.end_capture(stream, &captured));
    CUgraph built = nullptr;
    CHECK(api.graph_create(&built, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS params{};
    params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.poolProps.location.id = device;
    params.bytesize = opt.graph_memory;
    CUgraphNode node = nullptr;
    CHECK(api.graph_add_mem_alloc_node(&node, built, nullptr, 0, &params));
    // The pool keeps the memory for reuse after the graphs are gone.
    launch_once(captured);
    launch_once(built);
    printf("graph_memory=ok\n");
    fflush(stdout);
}

void prefetch()
{
    CUdeviceptr p = 0;
    CHECK(api.mem_alloc(&p, 1 << 20));
    CHECK(api.prefetch_v1(p, 1 << 20, device, stream));
    CUmemLocation loc{};
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = device;
    CHECK(api.prefetch_v2(p, 1 << 20, loc, 0, stream));
    sync_stream();
    CHECK(api.mem_free(p));
}

// Queues a wait for a flag on one stream, then (once `opt.wait_flag` exists)
// writes the flag from a second stream: the first stream's work depends on
// a submission this thread makes later. A drain that synchronises in
// between must let that submission through, or the process hangs.
// A flag in device memory that the work queued on `stream` from now on waits
// for; written from a stream of its own by write_flag().
struct QueuedFlag {
    CUdeviceptr flag = 0;
    CUstream writer = nullptr;
};

QueuedFlag queue_flag_wait()
{
    QueuedFlag f;
    CHECK(api.mem_alloc(&f.flag, 4096));
    CHECK(api.memset_d8(f.flag, 0, 4096));
    CHECK(api.stream_create(&f.writer, 0));
    CHECK(api.stream_wait_value32(stream, f.flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    return f;
}

// Writes the flag, waits for the work behind it, frees it.
void write_flag(const QueuedFlag& f)
{
    CHECK(api.stream_write_value32(f.writer, f.flag, 1, 0));
    sync_stream();
    CHECK(api.stream_synchronize(f.writer));
    CHECK(api.mem_free(f.flag));
}

void flag_wait()
{
    const QueuedFlag flag = queue_flag_wait();
    printf("waiting=ok\n");
    fflush(stdout);
    wait_for(opt.wait_flag);
    CUdeviceptr more = 0;
    if (opt.alloc_while_flag_waits != 0) {
        // An allocation that may find the GPU full while the first stream's
        // work cannot end before the write below: work on it must neither
        // hang nor touch an unmapped address.
        CHECK(api.mem_alloc(&more, opt.alloc_while_flag_waits));
        CHECK(api.memset_d8(more, 0x5a, opt.alloc_while_flag_waits));
    }
    write_flag(flag);
    if (more != 0) {
        unsigned char tail[64];
        CHECK(api.memcpy_dtoh(tail, more + opt.alloc_while_flag_waits - sizeof tail, sizeof tail));
        const bool set = std::all_of(std::begin(tail), std::end(tail),
                                     [](unsigned char b) { return b == 0x5a; });
        printf("more=%s\n", set ? "ok" : "corrupt");
        CHECK(api.mem_free(more));
    }
    printf("flag=ok\n");
}

// A 2D array (16 MiB), a 3D array (1 MiB) and a mipmapped array of two
// levels (1.25 MiB), kept until the end.
void arrays()
{
    CUDA_ARRAY_DESCRIPTOR d2{};
    d2.Width = d2.Height = 1024;
    d2.Format = CU_AD_FORMAT_FLOAT;
    d2.NumChannels = 4;
    CUarray a = nullptr, b = nullptr;
    CHECK(api.array_create(&a, &d2));
    CUDA_ARRAY3D_DESCRIPTOR d3{};
    d3.Width = d3.Height = d3.Depth = 64;
    d3.Format = CU_AD_FORMAT_FLOAT;
    d3.NumChannels = 1;
    CHECK(api.array3d_create(&b, &d3));
    CUDA_ARRAY3D_DESCRIPTOR dm{};
    dm.Width = dm.Height = 512;
    dm.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    dm.NumChannels = 4;
    CUmipmappedArray m = nullptr;
    CHECK(api.mipmapped_create(&m, &dm, 2));
    printf("arrays=ok\n");
}

// VMM memory mapped, its handle retained from the address (the same value)
// and released once: the mapping keeps the memory, which must stay counted.
void vmm_retained()
{
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemGenericAllocationHandle h = 0, again = 0;
    CUdeviceptr va = 0;
    CHECK(api.mem_create(&h, opt.vmm_retained, &prop, 0));
    CHECK(api.mem_address_reserve(&va, opt.vmm_retained, 0, 0, 0));
    CHECK(api.mem_map(va, opt.vmm_retained, 0, h, 0));
    CHECK(api.mem_retain(&again, reinterpret_cast<void*>(va)));
    CHECK(api.mem_release(again));
    printf("vmm_retained=%s\n", again == h ? "same" : "different");
}

// Captures that end without a graph: one forked into a second stream that
// is never joined back (the end fails with CUDA_ERROR_STREAM_CAPTURE_UNJOINED
// and ends the capture), one whose stream is destroyed while capturing.
void failed_captures()
{
    CUstream origin = nullptr, side = nullptr, doomed = nullptr;
    CHECK(api.stream_create(&origin, 0));
    CHECK(api.stream_create(&side, 0));
    CHECK(api.stream_create(&doomed, 0));
    // Lives until the process exits (the fake driver has no cuEventDestroy):
    // held by a static, so that a leak checker sees it reachable.
    static CUevent fork = nullptr;
    CHECK(api.event_create(&fork, 0));
    CHECK(api.begin_capture(origin, CU_STREAM_CAPTURE_MODE_RELAXED));
    launch_on(origin, 1000);
    CHECK(api.event_record(fork, origin));
    CHECK(api.stream_wait_event(side, fork, 0));
    launch_on(side, 1000);
    CUgraph g = nullptr;
    printf("unjoined=%d\n", static_cast<int>(api.end_capture(origin, &g)));
    CHECK(api.begin_capture(doomed, CU_STREAM_CAPTURE_MODE_RELAXED));
    launch_on(doomed, 1000);
    printf("destroy_capturing=%d\n", static_cast<int>(api.stream_destroy(doomed)));
    fflush(stdout);
}

// cuMemFree of device memory that queued work still uses (a memset behind a
// 100 ms kernel on a stream of its own), while another stream captures, so
// that no synchronisation is allowed: the memory must stay mapped until that
// work has run ("free-during-capture=ok"; a fault fails the stream's sync).
// With --alloc SIZE, the memory is of SIZE (64 MiB otherwise), and one more
// allocation of SIZE follows the free, still during the capture, set to 2
// on a stream of its own before the queued memset runs: "reuse=ok" if it
// still holds 2 once that memset has run (the freed memory was not handed
// out again while work used it), "reuse=overwritten" otherwise.
void free_during_capture()
{
    const size_t bytes = opt.alloc != 0 ? opt.alloc : 64 << 20;
    CUstream worker = nullptr, capturing = nullptr, other = nullptr;
    CHECK(api.stream_create(&worker, 0));
    CHECK(api.stream_create(&capturing, 0));
    CHECK(api.stream_create(&other, 0));
    CUdeviceptr p = 0;
    CHECK(api.mem_alloc(&p, bytes));
    launch_on(worker, 100000);
    CHECK(api.memset_d8_async(p, 1, bytes, worker));
    CHECK(api.begin_capture(capturing, CU_STREAM_CAPTURE_MODE_RELAXED));
    launch_on(capturing, 1000);
    CHECK(api.mem_free(p));
    CUdeviceptr again = 0;
    if (opt.alloc != 0)
        CHECK(api.mem_alloc(&again, bytes));
    CUgraph g = nullptr;
    CHECK(api.end_capture(capturing, &g));
    CHECK(api.graph_destroy(g));
    if (again != 0) {
        CHECK(api.memset_d8_async(again, 2, bytes, other));
        CHECK(api.stream_synchronize(other));
    }
    CHECK(api.stream_synchronize(worker));
    if (again != 0) {
        std::vector<unsigned char> back(bytes);
        CHECK(api.memcpy_dtoh(back.data(), again, bytes));
        const bool ok =
            std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 2; });
        printf("reuse=%s\n", ok ? "ok" : "overwritten");
    }
    printf("free-during-capture=ok\n");
    fflush(stdout);
}

// Work on an explicit stream from a thread with no current context: the
// driver takes the context from the stream, so it reaches the GPU.
void contextless()
{
    CUdeviceptr p = 0;
    CHECK(api.mem_alloc(&p, 4096));
    std::vector<unsigned char> in(4096, 7);
    CHECK(api.ctx_set_current(nullptr));
    printf("contextless=ready\n");
    fflush(stdout);
    CHECK(api.memset_d8_async(p, 0x11, 4096, stream));
    CHECK(api.memcpy_htod_async(p, in.data(), in.size(), stream));
    printf("contextless=submitted\n");
    fflush(stdout);
    sync_stream();
    CHECK(api.ctx_set_current(context));
    CHECK(api.mem_free(p));
}

// One line: what cuPointerGetAttributes and cuPointerGetAttribute say of the
// last allocation's last byte (--late-alloc's if made), and how long they
// took.
void attrs(const char* when)
{
    if (!opt.attrs || pointers.empty())
        return;
    const CUdeviceptr base = late_pointer != 0 ? late_pointer : pointers.back();
    const CUdeviceptr p = base + (late_pointer != 0 ? opt.late_alloc : opt.alloc) - 1;
    CUcontext ctx = nullptr, ctx_alone = nullptr;
    unsigned int type = 0;
    unsigned long long id = 0;
    int ordinal = -2;
    CUdeviceptr start = 0;
    CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
    void* data[] = {&ctx, &type, &id, &ordinal, &start};
    timespec t0{}, t1{};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const CUresult r = api.pointer_get_attributes(5, which, data, p);
    const CUresult r1 = api.pointer_get_attribute(&ctx_alone, CU_POINTER_ATTRIBUTE_CONTEXT, p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    size_t size = 0;
    api.pointer_get_attribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p);
    printf("attrs-%s r=%d/%d ctx=%s/%s type=%u ordinal=%d id=%llu start=%s size=%zu ms=%ld\n", when,
           static_cast<int>(r), static_cast<int>(r1), ctx == context ? "same" : "other",
           ctx_alone == context ? "same" : "other", type, ordinal, id, start == base ? "ok" : "bad",
           size, ms);
    fflush(stdout);
}

// See --peer-kernel.
CUresult peer_result = CUDA_SUCCESS;
int peer_rounds = 0;

CUcontext peer = nullptr;  // GPU 1's primary context, retained in setup()

CUcontext peer_context()
{
    CUdevice other = 0;
    CHECK(api.device_get(&other, 1));
    CHECK(api.primary_retain(&peer, other));
    return peer;
}

CUresult peer_kernel_once()
{
    CUresult r = CUDA_SUCCESS;
    if ((r = api.ctx_set_current(peer)) != CUDA_SUCCESS)
        return r;
    if (peer_rounds == 0 && (r = api.ctx_enable_peer(context, 0)) != CUDA_SUCCESS)
        return r;
    auto f = reinterpret_cast<CUfunction>(2);  // the fake's kTouchKernel
    for (const CUdeviceptr p : pointers) {
        uint32_t us = 1000;
        CUdeviceptr at = p;
        uint64_t bytes = opt.alloc;
        void* params[] = {&us, &at, &bytes};
        if ((r = api.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr)) !=
            CUDA_SUCCESS)
            return r;
    }
    if ((r = api.ctx_synchronize()) != CUDA_SUCCESS)
        return r;
    if (opt.peer_disable && peer_rounds == 0 && (r = api.ctx_disable_peer(context)) != CUDA_SUCCESS)
        return r;
    ++peer_rounds;
    return CUDA_SUCCESS;
}

// The first round under --capture-until: its kernels wait for a flag that
// is written only after a capture, which lasts until the file exists.
void kernels_behind_a_capture()
{
    const QueuedFlag flag = queue_flag_wait();
    CUstream capturing = nullptr;
    CHECK(api.stream_create(&capturing, 0));
    for (int i = 0; i < opt.kernels; ++i)
        launch(opt.kernel_us);
    CHECK(api.begin_capture(capturing, CU_STREAM_CAPTURE_MODE_RELAXED));
    launch_on(capturing, 1000);
    printf("capturing=ok\n");
    fflush(stdout);
    wait_for(opt.capture_until);
    CUgraph g = nullptr;
    CHECK(api.end_capture(capturing, &g));
    CHECK(api.graph_destroy(g));
    write_flag(flag);
}

void run_round()
{
    static bool first = true;
    if (opt.graph) {
        graph();
    } else if (first && !opt.capture_until.empty()) {
        kernels_behind_a_capture();
    } else {
        for (int i = 0; i < opt.kernels; ++i)
            launch(opt.kernel_us);
        sync_stream();
    }
    first = false;
    if (opt.copies)
        copies();
    if (opt.prefetch)
        prefetch();
    if (opt.peer_kernel && peer_result == CUDA_SUCCESS) {
        peer_result = peer_kernel_once();
        CHECK(api.ctx_set_current(context));
    }
}

size_t parse_size(const char* s)
{
    char* end = nullptr;
    double v = strtod(s, &end);
    switch (*end) {
        case 'K':
            v *= 1024;
            break;
        case 'M':
            v *= 1024 * 1024;
            break;
        case 'G':
            v *= 1024.0 * 1024 * 1024;
            break;
        default:
            break;
    }
    return static_cast<size_t>(v);
}

bool parse(int argc, char** argv)
{
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--route")
            opt.route = next();
        else if (a == "--ptsz")
            opt.per_thread = true;
        else if (a == "--kernels")
            opt.kernels = atoi(next());
        else if (a == "--kernel-us")
            opt.kernel_us = static_cast<uint32_t>(atoi(next()));
        else if (a == "--ex")
            opt.launch_ex = true;
        else if (a == "--stream")
            opt.own_stream = true;
        else if (a == "--graph")
            opt.graph = true;
        else if (a == "--copies")
            opt.copies = true;
        else if (a == "--meminfo")
            opt.meminfo = true;
        else if (a == "--release-primary-when")
            opt.release_primary_when = next();
        else if (a == "--graph-memory")
            opt.graph_memory = parse_size(next());
        else if (a == "--meminfo-after-work")
            opt.meminfo_after_work = true;
        else if (a == "--prefetch")
            opt.prefetch = true;
        else if (a == "--fork")
            opt.fork_child = true;
        else if (a == "--check-data")
            opt.check_data = true;
        else if (a == "--late-alloc")
            opt.late_alloc = parse_size(next());
        else if (a == "--late-alloc-after")
            opt.late_alloc_after = next();
        else if (a == "--late-stream")
            opt.late_stream = true;
        else if (a == "--free-middle")
            opt.free_middle = true;
        else if (a == "--free-first")
            opt.free_first = true;
        else if (a == "--no-free")
            opt.free_at_end = false;
        else if (a == "--alloc")
            opt.alloc = parse_size(next());
        else if (a == "--allocs")
            opt.allocs = atoi(next());
        else if (a == "--managed")
            opt.managed = parse_size(next());
        else if (a == "--async-alloc")
            opt.async_alloc = parse_size(next());
        else if (a == "--vmm")
            opt.vmm = parse_size(next());
        else if (a == "--ipc")
            opt.ipc = true;
        else if (a == "--gpudirect")
            opt.gpudirect = next();
        else if (a == "--failed-captures")
            opt.failed_captures = true;
        else if (a == "--free-during-capture")
            opt.free_during_capture = true;
        else if (a == "--deprecated")
            opt.deprecated = true;
        else if (a == "--arrays")
            opt.arrays = true;
        else if (a == "--vmm-retained")
            opt.vmm_retained = parse_size(next());
        else if (a == "--contextless")
            opt.contextless = true;
        else if (a == "--wait-flag")
            opt.wait_flag = next();
        else if (a == "--alloc-while-flag-waits")
            opt.alloc_while_flag_waits = parse_size(next());
        else if (a == "--barrier")
            opt.barrier = next();
        else if (a == "--until")
            opt.until = next();
        else if (a == "--pause-until")
            opt.pause_until = next();
        else if (a == "--pauses-until")
            opt.pauses_until = next();
        else if (a == "--free-async")
            opt.free_async = true;
        else if (a == "--fault-then-alloc")
            opt.fault_then_alloc = true;
        else if (a == "--fault-then-free")
            opt.fault_then_free = true;
        else if (a == "--fail-late-alloc")
            opt.fail_late_alloc = next();
        else if (a == "--fail-first-alloc")
            opt.fail_first_alloc = next();
        else if (a == "--graph-memset-node")
            opt.graph_memset_node = true;
        else if (a == "--attrs")
            opt.attrs = true;
        else if (a == "--peer-kernel")
            opt.peer_kernel = true;
        else if (a == "--peer-disable")
            opt.peer_disable = true;
        else if (a == "--busy-until")
            opt.busy_until = next();
        else if (a == "--touch")
            opt.touch = true;
        else if (a == "--capture-until")
            opt.capture_until = next();
        else if (a == "--escape-after-alloc")
            opt.escape_after_alloc = true;
        else if (a == "--hold-ms")
            opt.hold_ms = atoi(next());
        else if (a == "--rounds")
            opt.rounds = atoi(next());
        else if (a == "--alloc-each-round")
            opt.alloc_each_round = parse_size(next());
        else if (a == "--load-each-round")
            opt.load_each_round = true;
        else if (a == "--pause-ms")
            opt.pause_ms = atoi(next());
        else if (a == "--dlopen-copy")
            opt.dlopen_copy = next();
        else
            return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (!parse(argc, argv)) {
        fprintf(stderr, "usage: see tests/preload/test_client.cpp\n");
        return 2;
    }
    const std::string error = fill_api(&api, opt.route, opt.per_thread);
    if (!error.empty()) {
        printf("error=%s\n", error.c_str());
        return 3;
    }
    setup();
    if (!opt.dlopen_copy.empty()) {
        // A program that loads libnvshare.so itself (RTLD_LOCAL) and calls
        // the driver through that copy (dlvsym: the preloaded copy's dlsym
        // would answer its own wrapper): the copy must stay out of the way.
        void* copy = dlopen(opt.dlopen_copy.c_str(), RTLD_NOW | RTLD_LOCAL);
        using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
        auto alloc = copy == nullptr
                         ? nullptr
                         : reinterpret_cast<AllocFn>(dlvsym(copy, "cuMemAlloc_v2", "NVSHARE_1"));
        CUdeviceptr p = 0;
        const CUresult r = alloc == nullptr ? CUDA_ERROR_NOT_FOUND : alloc(&p, 12345);
        printf("dlopen-copy=%s %s %d\n", r == CUDA_SUCCESS ? "ok" : "failed",
               copy == nullptr ? dlerror() : "loaded", static_cast<int>(r));
    }
    allocate();
    if (opt.fault_then_alloc) {
        fault_then_alloc();
        return 0;
    }
    if (opt.fault_then_free) {
        fault_then_free();
        return 0;
    }
    if (opt.meminfo)
        meminfo();
    if (opt.contextless)
        contextless();
    if (opt.arrays)
        arrays();
    if (opt.vmm_retained != 0)
        vmm_retained();
    if (opt.graph_memory != 0)
        graph_memory();
    if (!opt.barrier.empty()) {
        FILE* f = fopen((opt.barrier + "." + std::to_string(getpid())).c_str(), "w");
        if (f != nullptr)
            fclose(f);
        wait_for(opt.barrier);
    }
    if (opt.failed_captures)
        failed_captures();
    if (opt.free_during_capture)
        free_during_capture();
    if (opt.check_data)
        write_patterns();
    if (opt.free_middle)
        free_middle();
    run_round();
    if (opt.late_alloc != 0) {
        if (!opt.late_alloc_after.empty())
            wait_for(opt.late_alloc_after);
        late_alloc();
        if (opt.late_stream && late_pointer != 0)
            late_stream();
    }
    if (opt.meminfo_after_work)
        meminfo();
    if (!opt.wait_flag.empty())
        flag_wait();
    attrs("first");
    if (!opt.pause_until.empty()) {
        wait_for(opt.pause_until);
        attrs("paused");
        if (opt.graph_memset_node)
            graph_memset_node();
    }
    while (!opt.busy_until.empty() && !exists(opt.busy_until))
        run_round();
    for (int r = 1; r < opt.rounds; ++r) {
        if (opt.pauses_until.empty())
            usleep(static_cast<useconds_t>(opt.pause_ms) * 1000);  // a CPU phase: GPU idle
        else
            wait_for(opt.pauses_until + "." + std::to_string(r));
        if (opt.alloc_each_round != 0) {
            CUdeviceptr p = 0;
            const auto began = std::chrono::steady_clock::now();
            CHECK(api.mem_alloc(&p, opt.alloc_each_round));
            if (opt.escape_after_alloc)
                escape(p, began, opt.alloc_each_round);
            pointers.push_back(p);
        }
        if (opt.load_each_round) {
            int threads = 0;
            CHECK(api.func_get_attribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                         reinterpret_cast<CUfunction>(1)));
        }
        run_round();
    }
    if (opt.fork_child) {
        const pid_t child = fork();
        if (child == 0) {
            // A child that uses CUDA sets it up afresh (as with a real driver).
            setup();
            run_round();
            printf("child=ok\n");
            fflush(stdout);
            _exit(0);
        }
        run_round();
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("error=child failed\n");
            return 5;
        }
    }
    while (!opt.until.empty() && !exists(opt.until)) {
        usleep(static_cast<useconds_t>(opt.pause_ms) * 1000);  // none unless --pause-ms
        run_round();
    }
    if (!opt.release_primary_when.empty()) {
        wait_for(opt.release_primary_when);
        timespec called{};
        clock_gettime(CLOCK_MONOTONIC, &called);  // the fake's log's clock
        const CUresult released = api.primary_release(device);
        printf("primary-release-called-ns=%llu\n",
               static_cast<unsigned long long>(called.tv_sec) * 1000000000ull +
                   static_cast<unsigned long long>(called.tv_nsec));
        printf("primary-release=%d\n", static_cast<int>(released));
        fflush(stdout);
        usleep(1000 * 1000);
        printf("done=ok\n");
        return 0;
    }
    if (opt.hold_ms > 0)
        usleep(static_cast<useconds_t>(opt.hold_ms) * 1000);
    if (opt.check_data)
        check_patterns();
    if (late_pointer != 0 && opt.free_first)
        late_pattern_ok("late-end");
    attrs("end");
    if (opt.free_async) {
        CUresult first = CUDA_SUCCESS;
        for (CUdeviceptr p : pointers)
            if (const CUresult r = api.mem_free_async(p, nullptr);
                r != CUDA_SUCCESS && first == CUDA_SUCCESS)
                first = r;
        CHECK(api.ctx_synchronize());
        if (first == CUDA_SUCCESS)
            printf("free-async=ok\n");
        else
            printf("free-async=error:%d\n", static_cast<int>(first));
        pointers.clear();
    }
    if (opt.free_at_end)
        for (CUdeviceptr p : pointers)
            if (p != 0)
                CHECK(api.mem_free(p));
    if (opt.peer_kernel) {
        if (peer_result == CUDA_SUCCESS)
            printf("peer=ok rounds=%d\n", peer_rounds);
        else
            printf("peer=error:%d rounds=%d\n", static_cast<int>(peer_result), peer_rounds);
    }
    printf("done=ok\n");
    return 0;
}
