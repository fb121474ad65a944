// A CUDA program for the gpu suite: every path nvshare must gate, with
// results checked. Each burst does a memset, a <<<>>> launch, a
// cudaLaunchKernelEx launch, a CUDA graph (made by stream capture), a 2D copy
// and an async copy back to pinned memory, then verifies the data. The
// "spin" kernel of each burst records when it ran on the GPU's own clock
// (%globaltimer, shared by all processes on the GPU), so the suite can prove
// from outside that two processes' kernels did or did not overlap.
//
// Built twice: with the default (legacy) stream and with
// --default-stream per-thread, which makes cudart use the _ptsz/_ptds driver
// entry points. The runtime is linked statically (nvcc's default).
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            fprintf(stderr, "gpu_work: %s failed at line %d: %s\n", #call, __LINE__,       \
                    cudaGetErrorString(err_));                                             \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

__device__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void fill(unsigned* buf, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] = static_cast<unsigned>(i) * seed;
}

__global__ void add_one(unsigned* buf, size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] += 1;
}

// Busy for `ns` nanoseconds, touching the buffer; records its interval.
__global__ void spin(const unsigned* buf, size_t n, unsigned long long ns,
                     unsigned long long* interval, unsigned* sink)
{
    const unsigned long long start = global_ns();
    unsigned acc = 0;
    size_t i = threadIdx.x;
    while (global_ns() - start < ns) {
        acc += buf[i % n];
        i += blockDim.x;
    }
    if (threadIdx.x == 0) {
        interval[0] = start;
        interval[1] = global_ns();
    }
    sink[threadIdx.x] = acc;  // keeps the loop; sink is overwritten later
}

int main(int argc, char** argv)
{
    int bursts = 5;
    long burst_us = 50000, gap_us = 200000;
    size_t mem_mib = 256;
    const char* log_path = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bursts"))
            bursts = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--burst-us"))
            burst_us = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--gap-us"))
            gap_us = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--mem-mib"))
            mem_mib = strtoul(argv[i + 1], nullptr, 10);
        else if (!strcmp(argv[i], "--log"))
            log_path = argv[i + 1];
    }
    const size_t n = mem_mib * (1u << 20) / sizeof(unsigned);
    const size_t width = 4096, rows = 64;  // the 2D copy: rows x width bytes
    unsigned *buf, *buf2, *host;
    unsigned long long* intervals;
    CHECK(cudaMalloc(&buf, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&buf2, width * rows));
    CHECK(cudaMalloc(&intervals, 2 * sizeof(unsigned long long) * bursts));
    CHECK(cudaMallocHost(&host, width * rows));

    // The graph: add_one on the buffer plus a memset of buf2, captured once.
    cudaStream_t cap;
    CHECK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
    add_one<<<256, 256, 0, cap>>>(buf, n);
    CHECK(cudaMemsetAsync(buf2, 0xff, width * rows, cap));
    CHECK(cudaStreamEndCapture(cap, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));

    const unsigned seed = 2654435761u ^ static_cast<unsigned>(getpid());
    for (int b = 0; b < bursts; ++b) {
        CHECK(cudaMemsetAsync(buf, 0, n * sizeof(unsigned)));  // memset path
        fill<<<256, 256>>>(buf, n, seed + b);                   // <<<>>> path
        cudaLaunchConfig_t cfg = {};                             // cudaLaunchKernelEx path
        cfg.gridDim = dim3(1);
        cfg.blockDim = dim3(256);
        CHECK(cudaLaunchKernelEx(&cfg, spin, static_cast<const unsigned*>(buf), n, static_cast<unsigned long long>(burst_us) * 1000,
                                 intervals + 2 * b, buf2));
        CHECK(cudaStreamSynchronize(0));
        CHECK(cudaGraphLaunch(exec, cap));  // graph path: buf += 1, buf2 = 0xff..
        CHECK(cudaStreamSynchronize(cap));
        // 2D copy path (cudart uses cuMemcpy2DUnaligned): first `width` bytes
        // of each of `rows` rows of buf into buf2.
        CHECK(cudaMemcpy2DAsync(buf2, width, buf, width * 2, width, rows, cudaMemcpyDeviceToDevice));
        CHECK(cudaMemcpyAsync(host, buf2, width * rows, cudaMemcpyDeviceToHost));
        CHECK(cudaStreamSynchronize(0));
        for (size_t r = 0; r < rows; ++r) {
            for (size_t c = 0; c < width / sizeof(unsigned); ++c) {
                const size_t i = r * (width * 2 / sizeof(unsigned)) + c;
                const unsigned expect = static_cast<unsigned>(i) * (seed + b) + 1;
                const unsigned got = host[r * (width / sizeof(unsigned)) + c];
                if (got != expect) {
                    fprintf(stderr, "gpu_work: burst %d: wrong value at %zu: %u != %u\n", b, i,
                            got, expect);
                    return 1;
                }
            }
        }
        usleep(static_cast<useconds_t>(gap_us));  // a CPU phase: the GPU is idle
    }

    std::vector<unsigned long long> iv(2 * bursts);
    CHECK(cudaMemcpy(iv.data(), intervals, iv.size() * sizeof(iv[0]), cudaMemcpyDeviceToHost));
    if (log_path != nullptr) {
        FILE* f = fopen(log_path, "w");
        if (f == nullptr) {
            perror(log_path);
            return 1;
        }
        for (int b = 0; b < bursts; ++b)
            fprintf(f, "%d %llu %llu\n", getpid(), iv[2 * b], iv[2 * b + 1]);
        fclose(f);
    }
    size_t free_b = 0, total_b = 0;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("gpu_work: RESULT OK pid %d bursts %d mem %zu MiB total %zu MiB free %zu MiB\n", getpid(),
           bursts, mem_mib, total_b >> 20, free_b >> 20);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(buf));
    CHECK(cudaFree(buf2));
    CHECK(cudaFree(intervals));
    CHECK(cudaFreeHost(host));
    return 0;
}
