#include "daemon/nvml.h"

#include <dlfcn.h>

namespace nvshare::daemon {

namespace {

// NVML's ABI as its header declares it (nvml.h is not needed for three
// calls): a return code (0 is success), an opaque device handle and the
// version 1 memory figures in bytes.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

struct Nvml {
    NvmlReturn (*by_uuid)(const char*, NvmlDevice*) = nullptr;
    NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
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
        n.memory = reinterpret_cast<decltype(n.memory)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
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
    NvmlMemory memory{};
    if (!n.ready || n.by_uuid(uuid.c_str(), &device) != 0 || n.memory(device, &memory) != 0 ||
        memory.total == 0)
        return std::nullopt;
    return memory.total;
}

}  // namespace nvshare::daemon
