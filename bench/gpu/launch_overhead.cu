// Per-call host cost of kernel launches and small async copies: what
// libnvshare.so adds to the CUDA submission path while its process holds the
// lock. Prints one line: the median over repetitions of ns per launch and ns
// per async copy. run_launch_bench.py runs it with and without the library,
// interleaved, and reports the ratio.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));               \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

__global__ void empty_kernel(int* p)
{
    if (p != nullptr && threadIdx.x == 1024)
        *p = 0;  // never: keeps the parameter
}

int main(int argc, char** argv)
{
    const int calls = argc > 1 ? atoi(argv[1]) : 20000;
    const int reps = argc > 2 ? atoi(argv[2]) : 15;
    // "managed": the copies' destination is managed memory, as cudaMalloc's
    // of less than 2 MiB becomes under nvshare: isolates what the library
    // itself adds.
    const bool managed = argc > 3 && argv[3][0] == 'm';
    // The destination's size: under nvshare, 2 MiB and more is device memory.
    const size_t bytes = argc > 4 ? strtoull(argv[4], nullptr, 0) : 4096;
    int* dev;
    int* host;
    if (managed)
        CHECK(cudaMallocManaged(&dev, bytes));
    else
        CHECK(cudaMalloc(&dev, bytes));
    CHECK(cudaMallocHost(&host, 4096));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    using clock = std::chrono::steady_clock;
    std::vector<double> launch, copy;
    for (int r = 0; r < reps + 2; ++r) {
        auto t0 = clock::now();
        for (int i = 0; i < calls; ++i)
            empty_kernel<<<1, 32, 0, s>>>(dev);
        auto t1 = clock::now();
        CHECK(cudaStreamSynchronize(s));
        auto t2 = clock::now();
        for (int i = 0; i < calls; ++i)
            CHECK(cudaMemcpyAsync(dev + (i & 1023), host + (i & 1023), 4, cudaMemcpyHostToDevice, s));
        auto t3 = clock::now();
        CHECK(cudaStreamSynchronize(s));
        if (r >= 2) {  // the first two are warm-up
            launch.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
            copy.push_back(std::chrono::duration<double, std::nano>(t3 - t2).count() / calls);
        }
    }
    std::sort(launch.begin(), launch.end());
    std::sort(copy.begin(), copy.end());
    printf("launch_ns %.1f copy_ns %.1f\n", launch[launch.size() / 2], copy[copy.size() / 2]);
    return 0;
}
