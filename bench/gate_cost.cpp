// Per-call cost of the gate's fast path (preload/lock/lock.h, gate.h) around an empty
// "driver call": lock::enter + lock::leave (an atomic add and subtract on the
// gate word, which also counts calls in flight, issue 20) next to the single
// atomic load the gate was before. 1 and 2 threads calling at once.
// Usage: build/bench/gate_cost [calls per thread]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "preload/lock/lock.h"

namespace nvshare::preload {
std::atomic<uint32_t> g_gate{kGateOpen | kGateActive};
namespace lock {
void wait_for_grant(CUstream)
{
    abort();  // the gate stays open: never taken
}
}  // namespace lock
}  // namespace nvshare::preload

namespace {

using namespace nvshare::preload;

__attribute__((noinline)) long driver_call(long x)
{
    asm volatile("");
    return x + 1;
}

template <bool Counted>
void calls(long n, long* sink)
{
    long s = 0;
    for (long i = 0; i < n; ++i) {
        if (Counted) {
            lock::enter(nullptr, 0);
            s += driver_call(i);
            lock::leave();
        } else {
            if (g_gate.load(std::memory_order_acquire) != (kGateOpen | kGateActive))
                abort();
            s += driver_call(i);
        }
    }
    *sink = s;
}

template <bool Counted>
double ns_per_call(int threads, long n)
{
    std::vector<std::thread> t;
    std::vector<long> sink(static_cast<size_t>(threads) * 16);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < threads; ++i)
        t.emplace_back(calls<Counted>, n, &sink[static_cast<size_t>(i) * 16]);
    for (auto& x : t)
        x.join();
    const std::chrono::duration<double, std::nano> d = std::chrono::steady_clock::now() - t0;
    return d.count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv)
{
    const long n = argc > 1 ? atol(argv[1]) : 20000000;
    for (int threads : {1, 2})
        printf("%d thread(s): one load %.2f ns/call, enter+leave %.2f ns/call\n", threads,
               ns_per_call<false>(threads, n), ns_per_call<true>(threads, n));
    return 0;
}
