#include "daemon/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <new>

namespace nvshare::daemon {

namespace {

// NVML's ABI as its header declares it (nvml.h is not needed for three
// calls): a return code (0 is success), an opaque device handle and the
// version 2 memory figures in bytes, whose `reserved` is what the driver
// keeps for itself: total less reserved is what CUDA reports as the GPU's
// total (a little less than the physical memory), the size nvshared needs.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemoryV2 {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
};
constexpr unsigned int kNvmlMemoryV2 = sizeof(NvmlMemoryV2) | 2u << 24;
// nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it;
// usedGpuMemory is all ones where NVML cannot tell (NVML_VALUE_NOT_AVAILABLE).
struct NvmlProcessInfo {
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance;
    unsigned int compute_instance;
};
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr unsigned long long kNvmlNotAvailable = ~0ull;

struct Nvml {
    NvmlReturn (*by_uuid)(const char*, NvmlDevice*) = nullptr;
    NvmlReturn (*memory)(NvmlDevice, NvmlMemoryV2*) = nullptr;
    NvmlReturn (*processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
    bool ready = false;
};

const Nvml& nvml()
{
    static const Nvml loaded = [] {
        Nvml n;
        void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr)
            return n;
        auto init = reinterpret_cast<NvmlReturn (*)()>(dlsym(lib, "nvmlInit_v2"));
        n.by_uuid = reinterpret_cast<decltype(n.by_uuid)>(dlsym(lib, "nvmlDeviceGetHandleByUUID"));
        n.memory = reinterpret_cast<decltype(n.memory)>(dlsym(lib, "nvmlDeviceGetMemoryInfo_v2"));
        n.processes = reinterpret_cast<decltype(n.processes)>(
            dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
        n.ready = init != nullptr && n.by_uuid != nullptr && n.memory != nullptr && init() == 0;
        return n;
    }();
    return loaded;
}

}  // namespace

std::optional<uint64_t> nvml_total_memory(const std::string& uuid)
{
    const Nvml& n = nvml();
    NvmlDevice device = nullptr;
    NvmlMemoryV2 memory{};
    memory.version = kNvmlMemoryV2;
    if (!n.ready || n.by_uuid(uuid.c_str(), &device) != 0 || n.memory(device, &memory) != 0 ||
        memory.total <= memory.reserved)
        return std::nullopt;
    return memory.total - memory.reserved;
}

std::optional<std::map<int32_t, uint64_t>> nvml_process_memory(const std::string& uuid)
{
    const Nvml& n = nvml();
    NvmlDevice device = nullptr;
    if (!n.ready || n.processes == nullptr || n.by_uuid(uuid.c_str(), &device) != 0)
        return std::nullopt;
    // Processes come and go between the calls: ask again with room for
    // those that came, a few times.
    unsigned int room = 64;
    for (int attempt = 0; attempt < 4; ++attempt) {
        std::unique_ptr<NvmlProcessInfo[]> infos(new (std::nothrow) NvmlProcessInfo[room]);
        if (!infos)
            return std::nullopt;
        unsigned int count = room;
        const NvmlReturn r = n.processes(device, &count, infos.get());
        if (r == kNvmlInsufficientSize) {
            room = std::max(room * 2, count + 16);
            continue;
        }
        if (r != 0 || count > room)
            return std::nullopt;
        std::map<int32_t, uint64_t> used;
        for (unsigned int i = 0; i < count; ++i)
            if (infos[i].used != kNvmlNotAvailable)
                used[static_cast<int32_t>(infos[i].pid)] += infos[i].used;
        return used;
    }
    return std::nullopt;
}

}  // namespace nvshare::daemon
