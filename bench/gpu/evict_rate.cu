// How fast managed memory moves between GPU and host by bulk prefetch, and
// whether splitting the move over several streams or host threads makes it
// faster (issue 6: eviction ran at 13-17 GB/s against 50 GB/s for swap-in).
//
//   evict_rate --mib N [--rounds R]
//
// For each way of splitting (streams x threads), R rounds of: prefetch the
// whole range to host (eviction), then back to the GPU (swap-in). Prints one
// JSON line per variant with the median rates of the rounds after the first.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(call)                                                                 \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "evict_rate: %s: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

using Clock = std::chrono::steady_clock;

__global__ void touch(char* p, size_t n)
{
    for (size_t i = (blockIdx.x * blockDim.x + threadIdx.x) * 4096ull; i < n;
         i += gridDim.x * blockDim.x * 4096ull)
        p[i] += 1;
}

// Moves [p, p+bytes) to `where` split into `streams` pieces, issued from
// `threads` host threads (each thread takes every threads-th piece).
static double move(char* p, size_t bytes, cudaMemLocation where, std::vector<cudaStream_t>& streams,
                   int threads)
{
    const size_t n = streams.size();
    const size_t piece = (bytes / n + (2u << 20) - 1) & ~size_t((2u << 20) - 1);
    const auto t0 = Clock::now();
    auto issue = [&](int t) {
        for (size_t i = t; i < n; i += threads) {
            const size_t off = i * piece;
            if (off >= bytes)
                break;
            CHECK(
                cudaMemPrefetchAsync(p + off, std::min(piece, bytes - off), where, 0, streams[i]));
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t)
        pool.emplace_back(issue, t);
    issue(0);
    for (auto& th : pool)
        th.join();
    for (auto s : streams)
        CHECK(cudaStreamSynchronize(s));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return bytes / s / 1e9;
}

int main(int argc, char** argv)
{
    size_t mib = 4096;
    int rounds = 4;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = strtoul(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
    }
    const size_t bytes = mib << 20;
    char* p;
    CHECK(cudaMallocManaged(&p, bytes));
    cudaMemLocation gpu{cudaMemLocationTypeDevice, 0}, host{cudaMemLocationTypeHost, 0};
    struct Variant {
        int streams, threads;
    };
    for (Variant v : {Variant{1, 1}, Variant{2, 1}, Variant{4, 1}, Variant{8, 1}, Variant{2, 2},
                      Variant{4, 4}, Variant{8, 8}, Variant{1, 1}}) {
        std::vector<cudaStream_t> streams(v.streams);
        for (auto& s : streams)
            CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        std::vector<cudaStream_t> one{streams[0]};
        move(p, bytes, gpu, one, 1);
        touch<<<1024, 256>>>(p, bytes);
        CHECK(cudaDeviceSynchronize());
        std::vector<double> out, in;
        for (int r = 0; r < rounds; ++r) {
            out.push_back(move(p, bytes, host, streams, v.threads));
            in.push_back(move(p, bytes, gpu, streams, v.threads));
        }
        out.erase(out.begin());
        in.erase(in.begin());
        std::sort(out.begin(), out.end());
        std::sort(in.begin(), in.end());
        printf(
            "{\"mib\": %zu, \"streams\": %d, \"threads\": %d, \"evict_gbs\": %.2f, "
            "\"evict_min_gbs\": %.2f, \"swap_in_gbs\": %.2f}\n",
            mib, v.streams, v.threads, out[out.size() / 2], out.front(), in[in.size() / 2]);
        fflush(stdout);
        for (auto s : streams)
            CHECK(cudaStreamDestroy(s));
    }
    CHECK(cudaFree(p));
    return 0;
}
