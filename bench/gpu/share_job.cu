// A synthetic GPU job for the sharing benchmarks: bursts of GPU work over a
// working set, separated by CPU phases (idle GPU). Each burst is a fixed
// amount of work (passes over the working set), so anything that slows the
// GPU side (waiting for the lock, page faults) shows as a longer burst.
//
//   share_job --ws-mib N --passes P --bursts B --cpu-ms C   one job
//   share_job --calibrate --ws-mib N                         ms per pass
//   share_job --h2d-mib N                                    pinned H2D GB/s
//
// Prints one JSON line: total seconds and every burst's latency (from the
// first submission of the burst to its completion, lock wait included).
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                 \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "share_job: %s: %s\n", #call, cudaGetErrorString(e_));  \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

using Clock = std::chrono::steady_clock;

__global__ void pass(float4* data, size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float4 v = data[i];
        v.x = v.x * 1.0001f + 1.0f;
        v.y = v.y * 0.9999f + 1.0f;
        data[i] = v;
    }
}

static double seconds(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

int main(int argc, char** argv)
{
    size_t ws_mib = 1024, h2d_mib = 0;
    int passes = 10, bursts = 4, cpu_ms = 1000;
    bool calibrate = false;
    for (int i = 1; i < argc; ++i) {
        auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
        if (!strcmp(argv[i], "--ws-mib"))
            ws_mib = strtoul(next(), nullptr, 10);
        else if (!strcmp(argv[i], "--passes"))
            passes = atoi(next());
        else if (!strcmp(argv[i], "--bursts"))
            bursts = atoi(next());
        else if (!strcmp(argv[i], "--cpu-ms"))
            cpu_ms = atoi(next());
        else if (!strcmp(argv[i], "--calibrate"))
            calibrate = true;
        else if (!strcmp(argv[i], "--h2d-mib"))
            h2d_mib = strtoul(next(), nullptr, 10);
    }

    if (h2d_mib > 0) {  // the pinned host-to-device bandwidth of this machine
        void *host, *dev;
        const size_t bytes = h2d_mib << 20;
        CHECK(cudaMallocHost(&host, bytes));
        CHECK(cudaMalloc(&dev, bytes));
        memset(host, 1, bytes);
        CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));  // warm-up
        std::vector<double> gbs;
        for (int r = 0; r < 5; ++r) {
            auto t0 = Clock::now();
            CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
            gbs.push_back(static_cast<double>(bytes) / seconds(t0, Clock::now()) / 1e9);
        }
        std::sort(gbs.begin(), gbs.end());
        printf("{\"h2d_gbs\": %.2f}\n", gbs[gbs.size() / 2]);
        return 0;
    }

    const size_t n = (ws_mib << 20) / sizeof(float4);
    float4* data;
    const auto t_start = Clock::now();
    CHECK(cudaMalloc(&data, n * sizeof(float4)));
    CHECK(cudaMemset(data, 0, n * sizeof(float4)));
    CHECK(cudaDeviceSynchronize());
    const int blocks = 132 * 8, threads = 512;

    if (calibrate) {
        pass<<<blocks, threads>>>(data, n);
        CHECK(cudaDeviceSynchronize());
        auto t0 = Clock::now();
        for (int p = 0; p < 20; ++p)
            pass<<<blocks, threads>>>(data, n);
        CHECK(cudaDeviceSynchronize());
        printf("{\"ms_per_pass\": %.4f}\n", seconds(t0, Clock::now()) * 1000 / 20);
        return 0;
    }

    std::vector<double> latency;
    for (int b = 0; b < bursts; ++b) {
        auto t0 = Clock::now();
        for (int p = 0; p < passes; ++p)
            pass<<<blocks, threads>>>(data, n);
        CHECK(cudaDeviceSynchronize());
        latency.push_back(seconds(t0, Clock::now()));
        if (cpu_ms > 0 && b + 1 < bursts)
            usleep(static_cast<useconds_t>(cpu_ms) * 1000);  // CPU phase: GPU idle
    }
    const double total = seconds(t_start, Clock::now());
    printf("{\"pid\": %d, \"total_s\": %.4f, \"bursts_s\": [", getpid(), total);
    for (size_t i = 0; i < latency.size(); ++i)
        printf("%s%.4f", i ? ", " : "", latency[i]);
    printf("]}\n");
    CHECK(cudaFree(data));
    return 0;
}
