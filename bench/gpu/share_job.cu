// A synthetic GPU job for the sharing benchmarks: bursts of GPU work over a
// working set, separated by CPU phases (idle GPU). Each burst is a fixed
// amount of work (passes over the working set), so anything that slows the
// GPU side (waiting for the lock, page faults) shows as a longer burst.
//
//   share_job --ws-mib N --passes P --bursts B --cpu-ms C   one job
//             [--cpu-busy]          the CPU phase spins instead of sleeping
//   share_job --ws-mib N --duration-s S [--chunk K]          steady job
//   share_job --calibrate --ws-mib N                         ms per pass
//   share_job --h2d-mib N                                    pinned H2D GB/s
// Either job also takes:
//   --ready-file PATH    created once the working set is allocated and
//                        written, just before the first pass is submitted
//   --die-with-parent    killed (SIGKILL) when the process that started it ends
//   --progress           a bursty job also prints, flushed, a line when each
//                        burst starts ({"burst_start": i, "t": CLOCK_MONOTONIC s})
//                        and ends ({"burst": i, "latency_s": s}), so that a
//                        job stopped at a time limit still tells its bursts
//
// A bursty job prints one JSON line: total seconds and every burst's latency
// (from the first submission of the burst to its completion, lock wait
// included). A steady job (--duration-s) submits passes without pause, K at a
// time, waiting for each group to finish, until S seconds have passed since
// its first pass; it prints one JSON line with its start and end and a mark
// after each group: [CLOCK_MONOTONIC seconds, passes completed so far], so
// that a benchmark can count the passes of several jobs over the same window.
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
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

// CLOCK_MONOTONIC in seconds: the same clock in every process of the machine
// (Python's time.monotonic() reads it too).
static double monotonic_s()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The CPU phase of a job that computes on the CPU between bursts: the
// process stays busy (no sleep, no CUDA call) while its GPU is idle.
static void spin_ms(int ms)
{
    const auto end = Clock::now() + std::chrono::milliseconds(ms);
    volatile unsigned long sink = 0;
    while (Clock::now() < end)
        for (int i = 0; i < 1000; ++i)
            sink = sink + static_cast<unsigned long>(i);
}

int main(int argc, char** argv)
{
    size_t ws_mib = 1024, h2d_mib = 0;
    int passes = 10, bursts = 4, cpu_ms = 1000, chunk = 10;
    double duration_s = 0;
    bool calibrate = false, cpu_busy = false, die_with_parent = false, progress = false;
    const char* ready_file = nullptr;
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
        else if (!strcmp(argv[i], "--cpu-busy"))
            cpu_busy = true;
        else if (!strcmp(argv[i], "--duration-s"))
            duration_s = atof(next());
        else if (!strcmp(argv[i], "--chunk"))
            chunk = std::max(1, atoi(next()));
        else if (!strcmp(argv[i], "--ready-file"))
            ready_file = next();
        else if (!strcmp(argv[i], "--die-with-parent"))
            die_with_parent = true;
        else if (!strcmp(argv[i], "--progress"))
            progress = true;
        else {
            fprintf(stderr, "share_job: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (die_with_parent) {
        const pid_t parent = getppid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)  // it ended before the line above
            return 1;
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

    if (ready_file != nullptr) {
        if (FILE* f = fopen(ready_file, "w"))
            fclose(f);
        else
            fprintf(stderr, "share_job: cannot create %s\n", ready_file);
    }

    if (duration_s > 0) {
        std::vector<std::pair<double, long>> marks;
        marks.reserve(1 << 16);
        long done = 0;
        const double start = monotonic_s();
        marks.emplace_back(start, 0);
        double now = start;
        while (now - start < duration_s) {
            for (int p = 0; p < chunk; ++p)
                pass<<<blocks, threads>>>(data, n);
            CHECK(cudaDeviceSynchronize());
            done += chunk;
            now = monotonic_s();
            marks.emplace_back(now, done);
        }
        printf("{\"pid\": %d, \"clock\": \"monotonic\", \"start_s\": %.6f, \"end_s\": %.6f, "
               "\"passes\": %ld, \"chunk\": %d, \"total_s\": %.4f, \"marks\": [",
               getpid(), start, now, done, chunk, seconds(t_start, Clock::now()));
        for (size_t i = 0; i < marks.size(); ++i)
            printf("%s[%.6f, %ld]", i ? ", " : "", marks[i].first, marks[i].second);
        printf("]}\n");
        CHECK(cudaFree(data));
        return 0;
    }

    std::vector<double> latency;
    for (int b = 0; b < bursts; ++b) {
        auto t0 = Clock::now();
        if (progress) {
            printf("{\"burst_start\": %d, \"t\": %.6f}\n", b, monotonic_s());
            fflush(stdout);
        }
        for (int p = 0; p < passes; ++p)
            pass<<<blocks, threads>>>(data, n);
        CHECK(cudaDeviceSynchronize());
        latency.push_back(seconds(t0, Clock::now()));
        if (progress) {
            printf("{\"burst\": %d, \"latency_s\": %.4f}\n", b, latency.back());
            fflush(stdout);
        }
        if (cpu_ms > 0 && b + 1 < bursts) {  // CPU phase: GPU idle
            if (cpu_busy)
                spin_ms(cpu_ms);
            else
                usleep(static_cast<useconds_t>(cpu_ms) * 1000);
        }
    }
    const double total = seconds(t_start, Clock::now());
    printf("{\"pid\": %d, \"total_s\": %.4f, \"bursts_s\": [", getpid(), total);
    for (size_t i = 0; i < latency.size(); ++i)
        printf("%s%.4f", i ? ", " : "", latency[i]);
    printf("]}\n");
    CHECK(cudaFree(data));
    return 0;
}
