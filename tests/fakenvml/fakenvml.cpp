// A stand-in for libnvidia-ml.so.1 (NVML) in tests: the GPUs and memory
// sizes named by FAKENVML_MEMORY ("UUID=BYTES[,UUID=BYTES...]"); nvmlInit_v2
// fails when it is unset, as on a host without the driver.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

struct FakeNvmlMemory {  // nvmlMemory_v2_t
    unsigned int version;
    unsigned long long total, reserved, free, used;
};

FAKE_EXPORT int nvmlInit_v2();
FAKE_EXPORT int nvmlDeviceGetHandleByUUID(const char* uuid, void** device);
FAKE_EXPORT int nvmlDeviceGetMemoryInfo_v2(void* device, FakeNvmlMemory* memory);

namespace {

// The size FAKENVML_MEMORY gives `uuid`, or 0.
unsigned long long size_of(const char* uuid)
{
    const char* list = getenv("FAKENVML_MEMORY");
    const size_t n = strlen(uuid);
    for (const char* p = list; p != nullptr && *p != '\0';) {
        if (strncmp(p, uuid, n) == 0 && p[n] == '=')
            return strtoull(p + n + 1, nullptr, 10);
        p = strchr(p, ',');
        p = p != nullptr ? p + 1 : nullptr;
    }
    return 0;
}

}  // namespace

FAKE_EXPORT int nvmlInit_v2()
{
    return getenv("FAKENVML_MEMORY") != nullptr ? 0 : 9;  // NVML_ERROR_DRIVER_NOT_LOADED
}

FAKE_EXPORT int nvmlDeviceGetHandleByUUID(const char* uuid, void** device)
{
    if (uuid == nullptr || device == nullptr || size_of(uuid) == 0)
        return 6;  // NVML_ERROR_NOT_FOUND
    *device = strdup(uuid);
    return 0;
}

// The size given is what CUDA would report; the driver's reserve (512 MiB
// here) comes on top, as on a real GPU.
FAKE_EXPORT int nvmlDeviceGetMemoryInfo_v2(void* device, FakeNvmlMemory* memory)
{
    if (device == nullptr || memory == nullptr || memory->version != (sizeof *memory | 2u << 24))
        return 2;  // NVML_ERROR_INVALID_ARGUMENT
    memory->reserved = 512ull << 20;
    memory->total = size_of(static_cast<const char*>(device)) + memory->reserved;
    memory->free = memory->total - memory->reserved;
    memory->used = 0;
    return 0;
}
