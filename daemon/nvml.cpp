#include "daemon/nvml.h"

#include <dlfcn.h>

namespace nvshare::daemon {

namespace {

// NVML's ABI as its header declares it (nvml.h is not needed for three
// calls): a return code (0 is success), an opaque device handle and the
// version 2 memory figures in bytes, whose `reserved` is what the driver
// keeps for itself: total less reserved is what CUDA reports as the GPU's
// total (143,155 of 143,771 MiB on an H200), the size nvshared needs.
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

struct Nvml {
    NvmlReturn (*by_uuid)(const char*, NvmlDevice*) = nullptr;
    NvmlReturn (*memory)(NvmlDevice, NvmlMemoryV2*) = nullptr;
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

}  // namespace nvshare::daemon
