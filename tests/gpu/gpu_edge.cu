// Edge cases of the driver API for the gpu suite (issue 20), one per mode,
// each reaching the driver the way frameworks do: cudart, plus driver
// functions from cudaGetDriverEntryPointByVersion (cuGetProcAddress
// underneath, so libnvshare.so hands out its wrappers).
//
//   --mode flag-wait --ready FILE --go FILE [--alloc-mib N]
//       Queues a wait for a flag on one stream, writes FILE, waits for GO to
//       exist, then writes the flag from another stream. A drop that comes
//       in between must not hang the process. With --alloc-mib N, N MiB of
//       cudaMalloc memory, set and read back, between the wait and the
//       write: an allocation that finds the GPU full then must neither hang
//       nor reach an unmapped address.
//   --mode free-during-capture
//       cudaFree of 256 MiB that a queued memset (behind a 200 ms kernel on a
//       stream of its own) still uses, while another stream captures: the
//       memset must run without an error (the memory stays mapped).
//   --mode contextless --ready FILE --go FILE
//       Allocates (the allocation returns once the memory is mapped: with
//       the GPU), writes FILE, waits for GO (meanwhile another process takes
//       the GPU), then, with no current context, a memset and a copy on an
//       explicit stream (the driver takes the context from the stream);
//       prints how long the calls took to return, then verifies.
//   --mode failed-captures [--bursts N --burst-us US --gap-us US]
//       A capture forked into a second stream and never joined back
//       (cudaStreamEndCapture fails with cudaErrorStreamCaptureUnjoined), a
//       stream destroyed while capturing; then bursts of GPU work separated
//       by CPU phases, their kernel intervals written to --log.
//   --mode accounting --ready FILE --go FILE [--plain-mib N]
//       Memory nvshare must count as pinned: a 64 MiB CUDA array, 32 MiB of
//       graph memory (a stream-ordered allocation captured into a graph,
//       launched once), and N MiB of cudaMalloc (plain under
//       NVSHARE_MANAGED=0); writes FILE and keeps it all until GO exists.
//   --mode meminfo
//       Allocates 16 MiB, runs a kernel (so it holds the lock), then prints
//       what cudaMemGetInfo answers: "RESULT OK meminfo FREE TOTAL".
//   --mode gpudirect
//       What GPUDirect RDMA asks of a cudaMalloc buffer (an address inside
//       it, as MPI and UCX pass): a dma-buf export, peer-memory tokens, the
//       RDMA-capable attribute; prints each answer
//       ("RESULT OK gpudirect dmabuf=R p2p=R rdma=V").
//   --mode native-answers
//       What the driver says of a cudaMalloc buffer (its last byte): the
//       context, memory type, ordinal, range start (pointer attributes, one
//       call for all and one per attribute), the buffer ID (the same twice);
//       then a kernel on it, and cudaFreeAsync of it on a stream.
//       Prints "RESULT OK native ctx=same|other type=T ordinal=O start=ok|bad
//       id-stable=1|0 free-async=E".
//   --mode fault-then-alloc
//       A 64 MiB cudaMalloc and a kernel on it; then a kernel writes to
//       reserved address space with nothing mapped (an illegal address: the
//       context is lost), then another 64 MiB cudaMalloc and a cudaFree of
//       the first. Prints "RESULT OK fault sync=E alloc=E free=E" (the
//       three errors).
//   --mode driver-error --call cuMemCreate|cuMemMap|cuMemSetAccess
//       Run with tests/gpu/fail_driver.c as libcuda.so.1: asks it to fail
//       the next CALL (CUDA_ERROR_UNKNOWN) before a 256 MiB cudaMalloc made
//       before the process holds the GPU, and again before one made while
//       it holds it; then one more allocation. Each allocation that
//       succeeds is set, added to by a kernel and checked; all are freed.
//       Prints "RESULT OK driver-error call=CALL early=E early-wrong=N
//       held=E next=E next-wrong=N free-change-mib=M" (M: cudaMemGetInfo's
//       free at the end less at the start).
//   --mode graph-node --alloc-mib N --ready FILE --go GO
//       Allocates N MiB, sets it to 0, writes FILE, waits for GO (meanwhile
//       another process takes the GPU and this one's memory is swapped
//       out), then makes a graph with one memset node (0x5a) on the buffer,
//       launches it and reads the last byte back. Prints "RESULT OK graph
//       node=E run=E byte=HEX".
//   --mode escape --alloc-mib N
//       A cudaMalloc of N MiB (while another process holds the GPU), then at
//       once a memset of it and a context synchronisation by the driver's own
//       functions, found in libcuda's symbol table by hand: work that passes
//       no hook of libnvshare.so, as a tool's trampoline would. Prints
//       "RESULT OK escape alloc-ms=MS memset=E sync=E".
//   --mode long-touch --alloc-mib N --burst-us US --ready FILE
//       Sets N MiB of cudaMalloc memory, then one kernel that adds 1 to every
//       word of it, pass after pass, for US microseconds; writes FILE once
//       the kernel is queued, and when it has ended checks every word on the
//       GPU. Prints "RESULT OK long-touch passes=MIN..MAX wrong=W" (W words
//       that do not hold their passes: memory moved under the kernel).
// Prints "gpu_edge: RESULT OK ..." when everything checked out.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t err_ = (call);                                                   \
        if (err_ != cudaSuccess) {                                                   \
            fprintf(stderr, "gpu_edge: %s failed at line %d: %s\n", #call, __LINE__, \
                    cudaGetErrorString(err_));                                       \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

#define CHECK_CU(call)                                                                     \
    do {                                                                                   \
        CUresult r_ = (call);                                                              \
        if (r_ != CUDA_SUCCESS) {                                                          \
            fprintf(stderr, "gpu_edge: %s failed at line %d: error %d\n", #call, __LINE__, \
                    static_cast<int>(r_));                                                 \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

namespace {

__device__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin(unsigned long long ns, unsigned long long* interval)
{
    const unsigned long long start = global_ns();
    while (global_ns() - start < ns) {
    }
    if (interval != nullptr && threadIdx.x == 0) {
        interval[0] = start;
        interval[1] = global_ns();
    }
}

template <typename F>
F driver(const char* name, int version)
{
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q));
    if (p == nullptr) {
        fprintf(stderr, "gpu_edge: no driver entry point %s\n", name);
        exit(1);
    }
    return reinterpret_cast<F>(p);
}

void touch(const char* path)
{
    FILE* f = fopen(path, "w");
    if (f != nullptr)
        fclose(f);
}

bool exists(const char* path)
{
    return access(path, F_OK) == 0;
}

unsigned long long monotonic_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<unsigned long long>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

int flag_wait(const char* ready, const char* go, long alloc_mib)
{
    auto wait_value = driver<decltype(&cuStreamWaitValue32_v2)>("cuStreamWaitValue32", 12000);
    auto write_value = driver<decltype(&cuStreamWriteValue32_v2)>("cuStreamWriteValue32", 12000);
    // The flag in mapped pinned host memory: stream memory operations refuse
    // managed memory (CUDA_ERROR_INVALID_VALUE), which is what
    // libnvshare makes of cudaMalloc.
    unsigned* host_flag;
    CHECK(cudaHostAlloc(&host_flag, 4096, cudaHostAllocMapped));
    memset(host_flag, 0, 4096);
    unsigned* flag;
    CHECK(cudaHostGetDevicePointer(&flag, host_flag, 0));
    cudaStream_t waiter, writer;
    CHECK(cudaStreamCreateWithFlags(&waiter, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking));
    spin<<<1, 32, 0, waiter>>>(20000000ull, nullptr);  // holds the lock now
    CHECK_CU(wait_value(reinterpret_cast<CUstream>(waiter), reinterpret_cast<CUdeviceptr>(flag), 1,
                        CU_STREAM_WAIT_VALUE_GEQ));
    spin<<<1, 32, 0, waiter>>>(1000000ull, nullptr);  // queued behind the wait
    touch(ready);
    while (!exists(go))
        usleep(1000);
    const size_t more_bytes = static_cast<size_t>(alloc_mib) << 20;
    unsigned char* more = nullptr;
    if (more_bytes != 0) {
        CHECK(cudaMalloc(&more, more_bytes));
        CHECK(cudaMemsetAsync(more, 0x5a, more_bytes, writer));
    }
    CHECK_CU(
        write_value(reinterpret_cast<CUstream>(writer), reinterpret_cast<CUdeviceptr>(flag), 1, 0));
    CHECK(cudaStreamSynchronize(waiter));
    CHECK(cudaStreamSynchronize(writer));
    if (more != nullptr) {
        unsigned char ends[2][64];
        CHECK(cudaMemcpy(ends[0], more, sizeof ends[0], cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(ends[1], more + more_bytes - sizeof ends[1], sizeof ends[1],
                         cudaMemcpyDeviceToHost));
        for (const auto& end : ends)
            for (unsigned char b : end)
                if (b != 0x5a) {
                    fprintf(stderr, "gpu_edge: the allocation lost its contents\n");
                    return 1;
                }
        CHECK(cudaFree(more));
    }
    CHECK(cudaFreeHost(host_flag));
    printf("gpu_edge: RESULT OK flag-wait\n");
    return 0;
}

int free_during_capture()
{
    constexpr size_t kBytes = 256ull << 20;
    cudaStream_t worker, capturing;
    CHECK(cudaStreamCreateWithFlags(&worker, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
    unsigned char* p = nullptr;
    CHECK(cudaMalloc(&p, kBytes));
    spin<<<1, 32, 0, worker>>>(200000000ull, nullptr);
    CHECK(cudaMemsetAsync(p, 1, kBytes, worker));
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    CHECK(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeRelaxed));
    spin<<<1, 32, 0, capturing>>>(1000ull, nullptr);
    CHECK(cudaFree(p));
    cudaGraph_t graph;
    CHECK(cudaStreamEndCapture(capturing, &graph));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaStreamSynchronize(worker));
    CHECK(cudaDeviceSynchronize());
    printf("gpu_edge: RESULT OK free-during-capture\n");
    return 0;
}

int contextless(const char* ready, const char* go)
{
    auto memset_async = driver<decltype(&cuMemsetD8Async)>("cuMemsetD8Async", 12000);
    auto htod_async = driver<decltype(&cuMemcpyHtoDAsync_v2)>("cuMemcpyHtoDAsync", 12000);
    auto get_current = driver<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent", 12000);
    auto set_current = driver<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent", 12000);
    const size_t n = 64u << 20;
    unsigned char *buf, *host;
    CHECK(cudaMalloc(&buf, n));
    CHECK(cudaMallocHost(&host, n));
    memset(host, 0x5a, n / 2);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUcontext ctx = nullptr;
    CHECK_CU(get_current(&ctx));
    CHECK_CU(set_current(nullptr));
    touch(ready);
    while (!exists(go))
        usleep(10000);
    const unsigned long long asked = monotonic_ns();
    const CUresult r1 =
        memset_async(reinterpret_cast<CUdeviceptr>(buf), 0x11, n, reinterpret_cast<CUstream>(s));
    const CUresult r2 =
        htod_async(reinterpret_cast<CUdeviceptr>(buf), host, n / 2, reinterpret_cast<CUstream>(s));
    const unsigned long long returned = monotonic_ns();
    CHECK_CU(set_current(ctx));
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS) {
        // Nothing reached the GPU: nothing to gate.
        printf("gpu_edge: RESULT OK contextless driver-refused %d %d\n", static_cast<int>(r1),
               static_cast<int>(r2));
        return 0;
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(host, buf, n, cudaMemcpyDeviceToHost));
    if (host[0] != 0x5a || host[n / 2 - 1] != 0x5a || host[n / 2] != 0x11 || host[n - 1] != 0x11) {
        fprintf(stderr, "gpu_edge: contextless: wrong data\n");
        return 1;
    }
    printf("gpu_edge: RESULT OK contextless waited_ns %llu\n", returned - asked);
    return 0;
}

int failed_captures(int bursts, long burst_us, long gap_us, const char* log_path)
{
    cudaStream_t origin, side, doomed;
    CHECK(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&doomed, cudaStreamNonBlocking));
    cudaEvent_t fork;
    CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed));
    spin<<<1, 32, 0, origin>>>(1000ull, nullptr);
    CHECK(cudaEventRecord(fork, origin));
    CHECK(cudaStreamWaitEvent(side, fork, 0));
    spin<<<1, 32, 0, side>>>(1000ull, nullptr);
    cudaGraph_t g = nullptr;
    const cudaError_t unjoined = cudaStreamEndCapture(origin, &g);
    if (unjoined != cudaErrorStreamCaptureUnjoined) {
        fprintf(stderr, "gpu_edge: unjoined capture ended with %s\n", cudaGetErrorName(unjoined));
        return 1;
    }
    cudaGetLastError();  // the failed end is not sticky; clear it
    CHECK(cudaStreamBeginCapture(doomed, cudaStreamCaptureModeRelaxed));
    spin<<<1, 32, 0, doomed>>>(1000ull, nullptr);
    const cudaError_t destroyed = cudaStreamDestroy(doomed);
    cudaGetLastError();

    unsigned long long* intervals;
    CHECK(cudaMalloc(&intervals, 2 * sizeof(unsigned long long) * bursts));
    for (int b = 0; b < bursts; ++b) {
        spin<<<1, 32>>>(static_cast<unsigned long long>(burst_us) * 1000, intervals + 2 * b);
        CHECK(cudaStreamSynchronize(0));
        usleep(static_cast<useconds_t>(gap_us));  // a CPU phase: the GPU is idle
    }
    std::vector<unsigned long long> iv(2 * bursts);
    CHECK(cudaMemcpy(iv.data(), intervals, iv.size() * sizeof(iv[0]), cudaMemcpyDeviceToHost));
    if (log_path != nullptr) {
        FILE* f = fopen(log_path, "w");
        if (f == nullptr)
            return 1;
        for (int b = 0; b < bursts; ++b)
            fprintf(f, "%d %llu %llu\n", getpid(), iv[2 * b], iv[2 * b + 1]);
        fclose(f);
    }
    printf("gpu_edge: RESULT OK failed-captures destroy-while-capturing %s\n",
           cudaGetErrorName(destroyed));
    return 0;
}

}  // namespace

int accounting(const char* ready, const char* go, long plain_mib)
{
    const cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
    cudaArray_t array;
    CHECK(cudaMallocArray(&array, &desc, 4096, 4096));  // 64 MiB
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void* graph_memory = nullptr;
    CHECK(cudaMallocAsync(&graph_memory, 32u << 20, s));
    CHECK(cudaFreeAsync(graph_memory, s));
    cudaGraph_t graph;
    CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    void* plain = nullptr;
    if (plain_mib > 0)
        CHECK(cudaMalloc(&plain, static_cast<size_t>(plain_mib) << 20));
    touch(ready);
    while (!exists(go))
        usleep(10000);
    printf("gpu_edge: RESULT OK accounting\n");
    return 0;
}

int meminfo()
{
    void* mine = nullptr;
    CHECK(cudaMalloc(&mine, 16u << 20));
    spin<<<1, 32>>>(1000000ull, nullptr);
    CHECK(cudaDeviceSynchronize());
    size_t free = 0, total = 0;
    CHECK(cudaMemGetInfo(&free, &total));
    printf("gpu_edge: RESULT OK meminfo %zu %zu\n", free, total);
    return 0;
}

int gpudirect()
{
    auto get_handle =
        driver<decltype(&cuMemGetHandleForAddressRange)>("cuMemGetHandleForAddressRange", 11070);
    auto get_attribute = driver<decltype(&cuPointerGetAttribute)>("cuPointerGetAttribute", 4000);
    void* buffer = nullptr;
    const size_t size = 4u << 20;
    CHECK(cudaMalloc(&buffer, size));
    const CUdeviceptr inside = reinterpret_cast<CUdeviceptr>(buffer) + (2u << 20);
    int fd = -1;
    const CUresult dmabuf =
        get_handle(&fd, inside, 2u << 20, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (dmabuf == CUDA_SUCCESS)
        close(fd);
    CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens{};
    const CUresult p2p = get_attribute(&tokens, CU_POINTER_ATTRIBUTE_P2P_TOKENS, inside);
    int rdma = -1;
    const CUresult rdma_r =
        get_attribute(&rdma, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, inside);
    printf("gpu_edge: RESULT OK gpudirect dmabuf=%d p2p=%d rdma=%d:%d\n", static_cast<int>(dmabuf),
           static_cast<int>(p2p), static_cast<int>(rdma_r), rdma);
    return 0;
}

__global__ void add_one(unsigned char* p, size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] += 1;
}

int native_answers()
{
    auto get_attribute = driver<decltype(&cuPointerGetAttribute)>("cuPointerGetAttribute", 4000);
    auto get_attributes = driver<decltype(&cuPointerGetAttributes)>("cuPointerGetAttributes", 7000);
    auto get_current = driver<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent", 4000);
    const size_t size = 96u << 20;
    void* buffer = nullptr;
    CHECK(cudaMalloc(&buffer, size));
    CHECK(cudaMemset(buffer, 0, size));
    const CUdeviceptr last = reinterpret_cast<CUdeviceptr>(buffer) + size - 1;
    CUcontext mine = nullptr, ctx = nullptr, ctx_alone = nullptr;
    CHECK_CU(get_current(&mine));
    unsigned int type = 0;
    unsigned long long id = 0, id_again = 0;
    int ordinal = -2;
    CUdeviceptr start = 0;
    CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
    void* data[] = {&ctx, &type, &id, &ordinal, &start};
    CHECK_CU(get_attributes(5, which, data, last));
    CHECK_CU(get_attribute(&ctx_alone, CU_POINTER_ATTRIBUTE_CONTEXT, last));
    add_one<<<256, 256>>>(static_cast<unsigned char*>(buffer), size);
    CHECK(cudaDeviceSynchronize());
    CHECK_CU(get_attribute(&id_again, CU_POINTER_ATTRIBUTE_BUFFER_ID, last));
    cudaStream_t s = nullptr;
    CHECK(cudaStreamCreate(&s));
    add_one<<<256, 256, 0, s>>>(static_cast<unsigned char*>(buffer), size);
    const cudaError_t freed = cudaFreeAsync(buffer, s);
    CHECK(cudaStreamSynchronize(s));
    printf(
        "gpu_edge: RESULT OK native ctx=%s type=%u ordinal=%d start=%s id-stable=%d "
        "free-async=%d\n",
        ctx == mine && ctx_alone == mine ? "same" : "other", type, ordinal,
        start == reinterpret_cast<CUdeviceptr>(buffer) ? "ok" : "bad", id == id_again && id != 0,
        static_cast<int>(freed));
    return 0;
}

__global__ void write_at(unsigned char* p)
{
    p[threadIdx.x * 4096] = 1;
}

int fault_then_alloc()
{
    auto reserve = driver<decltype(&cuMemAddressReserve)>("cuMemAddressReserve", 10020);
    unsigned char* before = nullptr;
    CHECK(cudaMalloc(&before, 64u << 20));
    add_one<<<256, 256>>>(before, 64u << 20);
    CHECK(cudaDeviceSynchronize());
    CUdeviceptr hole = 0;
    CHECK_CU(reserve(&hole, 2u << 20, 0, 0, 0));
    write_at<<<1, 32>>>(reinterpret_cast<unsigned char*>(hole));
    const cudaError_t sync = cudaDeviceSynchronize();
    void* p = nullptr;
    const cudaError_t alloc = cudaMalloc(&p, 64u << 20);
    const cudaError_t freed = cudaFree(before);
    printf("gpu_edge: RESULT OK fault sync=%d alloc=%d free=%d\n", static_cast<int>(sync),
           static_cast<int>(alloc), static_cast<int>(freed));
    return 0;
}

__global__ void count_not(const unsigned char* p, size_t n, unsigned char value,
                          unsigned long long* wrong)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (p[i] != value)
            atomicAdd(wrong, 1ull);
}

// Sets `size` bytes at p to 0x5a, adds 1 by a kernel, and counts the bytes
// that do not read 0x5b: 0 if the memory works.
unsigned long long wrong_bytes(unsigned char* p, size_t size)
{
    unsigned long long* wrong = nullptr;
    unsigned long long bad = ~0ull;
    CHECK(cudaMalloc(&wrong, sizeof *wrong));
    CHECK(cudaMemset(wrong, 0, sizeof *wrong));
    CHECK(cudaMemset(p, 0x5a, size));
    add_one<<<256, 256>>>(p, size);
    count_not<<<256, 256>>>(p, size, 0x5b, wrong);
    CHECK(cudaMemcpy(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(wrong));
    return bad;
}

int driver_error(const char* call)
{
    using FailNext = int (*)(const char*, CUresult);
    void* driver_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto fail = driver_handle != nullptr
                    ? reinterpret_cast<FailNext>(dlsym(driver_handle, "fail_driver_next"))
                    : nullptr;
    if (fail == nullptr) {
        fprintf(stderr, "gpu_edge: no fail_driver_next: run with fail_driver.c's libcuda.so.1\n");
        return 1;
    }
    const size_t size = 256u << 20;
    size_t free_at_start = 0, free_at_end = 0, total = 0;
    CHECK(cudaMemGetInfo(&free_at_start, &total));
    // Before the process holds the GPU: the memory is placed at the grant.
    unsigned char *early = nullptr, *held = nullptr;
    CHECK(fail(call, CUDA_ERROR_UNKNOWN) == 0 ? cudaSuccess : cudaErrorInvalidValue);
    const cudaError_t early_alloc = cudaMalloc(&early, size);
    const unsigned long long early_wrong =
        early_alloc == cudaSuccess ? wrong_bytes(early, size) : 0;
    // Holding it (the kernels above ran): the allocation places its memory.
    CHECK(fail(call, CUDA_ERROR_UNKNOWN) == 0 ? cudaSuccess : cudaErrorInvalidValue);
    const cudaError_t held_alloc = cudaMalloc(&held, size);
    cudaGetLastError();  // the failed allocation's error is not sticky
    const cudaError_t next_alloc = cudaMalloc(&held, size);
    const unsigned long long held_wrong = next_alloc == cudaSuccess ? wrong_bytes(held, size) : 0;
    if (early_alloc == cudaSuccess)
        CHECK(cudaFree(early));
    if (next_alloc == cudaSuccess)
        CHECK(cudaFree(held));
    CHECK(cudaMemGetInfo(&free_at_end, &total));
    printf(
        "gpu_edge: RESULT OK driver-error call=%s early=%d early-wrong=%llu held=%d next=%d "
        "next-wrong=%llu free-change-mib=%lld\n",
        call, static_cast<int>(early_alloc), early_wrong, static_cast<int>(held_alloc),
        static_cast<int>(next_alloc), held_wrong,
        (static_cast<long long>(free_at_end) - static_cast<long long>(free_at_start)) / (1 << 20));
    return 0;
}

int graph_node(const char* ready, const char* go, long alloc_mib)
{
    auto add_memset = driver<decltype(&cuGraphAddMemsetNode)>("cuGraphAddMemsetNode", 10000);
    auto get_current = driver<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent", 4000);
    const size_t size = static_cast<size_t>(alloc_mib) << 20;
    unsigned char* buffer = nullptr;
    CHECK(cudaMalloc(&buffer, size));
    CHECK(cudaMemset(buffer, 0, size));
    CHECK(cudaDeviceSynchronize());
    CUcontext ctx = nullptr;
    CHECK_CU(get_current(&ctx));
    touch(ready);
    while (!exists(go))
        usleep(10000);
    cudaGraph_t graph = nullptr;
    CHECK(cudaGraphCreate(&graph, 0));
    CUDA_MEMSET_NODE_PARAMS p{};
    p.dst = reinterpret_cast<CUdeviceptr>(buffer);
    p.elementSize = 1;
    p.width = size;
    p.height = 1;
    p.value = 0x5a;
    CUgraphNode node = nullptr;
    const CUresult added = add_memset(&node, reinterpret_cast<CUgraph>(graph), nullptr, 0, &p, ctx);
    cudaError_t ran = cudaErrorNotReady;
    unsigned char byte = 0;
    if (added == CUDA_SUCCESS) {
        cudaGraphExec_t exec = nullptr;
        ran = cudaGraphInstantiate(&exec, graph, 0);
        if (ran == cudaSuccess)
            ran = cudaGraphLaunch(exec, nullptr);
        if (ran == cudaSuccess)
            ran = cudaDeviceSynchronize();
        if (ran == cudaSuccess)
            ran = cudaMemcpy(&byte, buffer + size - 1, 1, cudaMemcpyDeviceToHost);
    }
    printf("gpu_edge: RESULT OK graph node=%d run=%d byte=%02x\n", static_cast<int>(added),
           static_cast<int>(ran), byte);
    return 0;
}

namespace {

// The address of libcuda's `name`, from its symbol table on disk: no
// dlsym, dlvsym or cuGetProcAddress, which libnvshare.so answers.
struct Found {
    const char* name;
    void* at;
};

int find_in_libcuda(dl_phdr_info* info, size_t, void* arg)
{
    auto* f = static_cast<Found*>(arg);
    if (info->dlpi_name == nullptr || strstr(info->dlpi_name, "libcuda.so") == nullptr)
        return 0;
    const int fd = open(info->dlpi_name, O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0)
        return 0;
    void* m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return 0;
    const auto* base = static_cast<const char*>(m);
    const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
    const auto* sh = reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum && f->at == nullptr; ++i) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const auto* syms = reinterpret_cast<const ElfW(Sym)*>(base + sh[i].sh_offset);
        const char* names = base + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof(ElfW(Sym)); ++k)
            if (syms[k].st_value != 0 && strcmp(names + syms[k].st_name, f->name) == 0) {
                f->at = reinterpret_cast<void*>(info->dlpi_addr + syms[k].st_value);
                break;
            }
    }
    munmap(m, static_cast<size_t>(st.st_size));
    return f->at != nullptr;
}

void* raw_driver(const char* name)
{
    Found f{name, nullptr};
    dl_iterate_phdr(find_in_libcuda, &f);
    return f.at;
}

int escape(long alloc_mib)
{
    using Memset = CUresult (*)(CUdeviceptr, unsigned char, size_t);
    using Sync = CUresult (*)();
    auto memset_raw = reinterpret_cast<Memset>(raw_driver("cuMemsetD8_v2"));
    auto sync_raw = reinterpret_cast<Sync>(raw_driver("cuCtxSynchronize"));
    if (memset_raw == nullptr || sync_raw == nullptr) {
        fprintf(stderr, "gpu_edge: libcuda's cuMemsetD8_v2 or cuCtxSynchronize not found\n");
        return 1;
    }
    const size_t size = static_cast<size_t>(alloc_mib) << 20;
    const auto began = std::chrono::steady_clock::now();
    void* buffer = nullptr;
    CHECK(cudaMalloc(&buffer, size));
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - began)
                             .count();
    const CUresult set = memset_raw(reinterpret_cast<CUdeviceptr>(buffer), 0x5a, size);
    const CUresult synced = sync_raw();
    printf("gpu_edge: RESULT OK escape alloc-ms=%lld memset=%d sync=%d\n", ms,
           static_cast<int>(set), static_cast<int>(synced));
    return 0;
}

__global__ void set_words(unsigned* buf, size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] = static_cast<unsigned>(i * 2654435761u);
}

// Thread t owns words t, t + stride, ...: it adds 1 to each, pass after pass,
// until `ns` have gone by, and records its passes.
__global__ void touch_for(unsigned* buf, size_t n, unsigned long long ns, unsigned* passes)
{
    const size_t t = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    const unsigned long long start = global_ns();
    unsigned done = 0;
    do {
        for (size_t i = t; i < n; i += stride)
            buf[i] += 1;
        ++done;
    } while (global_ns() - start < ns);
    passes[t] = done;
}

__global__ void count_wrong(const unsigned* buf, size_t n, const unsigned* passes, size_t owners,
                            unsigned long long* wrong)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (buf[i] != static_cast<unsigned>(i * 2654435761u) + passes[i % owners])
            atomicAdd(wrong, 1ull);
}

int long_touch(const char* ready, long alloc_mib, long burst_us)
{
    const size_t n = (static_cast<size_t>(alloc_mib) << 20) / sizeof(unsigned);
    const unsigned blocks = 512, threads = 256;
    const size_t owners = static_cast<size_t>(blocks) * threads;
    unsigned *buf = nullptr, *passes = nullptr;
    unsigned long long* wrong = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&passes, owners * sizeof(unsigned)));
    CHECK(cudaMalloc(&wrong, sizeof *wrong));
    CHECK(cudaMemset(wrong, 0, sizeof *wrong));
    set_words<<<blocks, threads>>>(buf, n);
    CHECK(cudaDeviceSynchronize());
    touch_for<<<blocks, threads>>>(buf, n, static_cast<unsigned long long>(burst_us) * 1000,
                                   passes);
    CHECK(cudaGetLastError());
    touch(ready);
    CHECK(cudaDeviceSynchronize());
    count_wrong<<<blocks, threads>>>(buf, n, passes, owners, wrong);
    std::vector<unsigned> p(owners);
    unsigned long long bad = 0;
    CHECK(cudaMemcpy(p.data(), passes, owners * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost));
    unsigned lo = p[0], hi = p[0];
    for (unsigned v : p) {
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    printf("gpu_edge: RESULT OK long-touch passes=%u..%u wrong=%llu\n", lo, hi, bad);
    CHECK(cudaFree(buf));
    CHECK(cudaFree(passes));
    CHECK(cudaFree(wrong));
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    std::string mode, call;
    const char *ready = "/dev/null", *go = "/dev/null", *log_path = nullptr;
    int bursts = 6;
    long burst_us = 40000, gap_us = 700000, plain_mib = 0, alloc_mib = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mode"))
            mode = argv[i + 1];
        else if (!strcmp(argv[i], "--ready"))
            ready = argv[i + 1];
        else if (!strcmp(argv[i], "--go"))
            go = argv[i + 1];
        else if (!strcmp(argv[i], "--log"))
            log_path = argv[i + 1];
        else if (!strcmp(argv[i], "--bursts"))
            bursts = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--burst-us"))
            burst_us = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--gap-us"))
            gap_us = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--plain-mib"))
            plain_mib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--alloc-mib"))
            alloc_mib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--call"))
            call = argv[i + 1];
    }
    CHECK(cudaFree(nullptr));  // the primary context, current on this thread
    if (mode == "flag-wait")
        return flag_wait(ready, go, alloc_mib);
    if (mode == "contextless")
        return contextless(ready, go);
    if (mode == "free-during-capture")
        return free_during_capture();
    if (mode == "failed-captures")
        return failed_captures(bursts, burst_us, gap_us, log_path);
    if (mode == "accounting")
        return accounting(ready, go, plain_mib);
    if (mode == "meminfo")
        return meminfo();
    if (mode == "gpudirect")
        return gpudirect();
    if (mode == "native-answers")
        return native_answers();
    if (mode == "fault-then-alloc")
        return fault_then_alloc();
    if (mode == "graph-node")
        return graph_node(ready, go, alloc_mib);
    if (mode == "escape")
        return escape(alloc_mib);
    if (mode == "long-touch")
        return long_touch(ready, alloc_mib, burst_us);
    if (mode == "driver-error")
        return driver_error(call.c_str());
    fprintf(stderr, "gpu_edge: unknown --mode %s\n", mode.c_str());
    return 2;
}
