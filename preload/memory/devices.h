// The GPUs this process uses, in the order it registers them with nvshared
// (a GPU's index here is its client-local index in the protocol), with the
// memory the process has on each.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/protocol.h"
#include "preload/driver/cuda_api.h"

namespace nvshare::preload::devices {

inline constexpr uint32_t kMaxGpus = proto::kMaxGpusPerClient;

enum class Kind { Managed, Pinned };

struct Gpu {
    CUdevice ordinal = 0;
    uint8_t uuid[proto::kUuidBytes] = {};
    uint64_t physical_memory = 0;
    char name[proto::kGpuNameBytes] = {};
    // CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: false where the CPU and
    // the GPU cannot use managed memory at the same time (some virtualised
    // or older setups); device allocations then stay plain. Set before the
    // GPU is published (g_count), never changed after.
    bool concurrent_managed = true;
    // The VMM granularity where the swap engine can run on this GPU (VMM
    // memory on the device and on the host, CUDA 12.? and later drivers),
    // else 0. Set before the GPU is published, never changed after.
    uint64_t swap_granularity = 0;
    std::atomic<uint64_t> capacity{0};       // from nvshared; 0 = not known
    std::atomic<uint64_t> others_pinned{0};  // from nvshared: what other processes pin
    std::atomic<uint64_t> graph_pool{0};     // graph memory counted in `pinned`
    std::atomic<int64_t> managed{0};
    std::atomic<int64_t> pinned{0};
    std::atomic<bool> dirty{false};  // usage changed since the last report
};

// Index of the GPU with this CUDA ordinal; registers it when `add` (querying
// the driver for its UUID, memory, name and concurrent managed access). -1 if
// unknown or on error.
int index_of(CUdevice ordinal, bool add);

uint32_t count();
// Changes whenever a GPU is added: the client then registers again.
uint32_t generation();
Gpu& at(uint32_t index);

// What this process may use on the GPU: nvshared's capacity, else physical.
uint64_t capacity(uint32_t index);
uint64_t used(uint32_t index);  // managed + pinned of this process
// What cuMemGetInfo calls free: the capacity less this process's use and
// the memory other processes pin there (which no schedule frees).
uint64_t available(uint32_t index);

void add_usage(uint32_t index, Kind kind, int64_t delta);

void reset_after_fork();

}  // namespace nvshare::preload::devices
