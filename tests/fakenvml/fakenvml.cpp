// A stand-in for libnvidia-ml.so.1 (NVML) in tests: the GPUs and memory
// sizes named by FAKENVML_MEMORY ("UUID=BYTES[,UUID=BYTES...]"); nvmlInit_v2
// fails when it is unset, as on a host without the driver. The compute
// processes of each GPU come from the file FAKENVML_PROCESSES names, read at
// every call (lines "UUID PID BYTES"; a GPU it does not name has none), each
// call taking FAKENVML_PROCESSES_DELAY_MS (a driver slow to answer).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
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

struct FakeNvmlProcess {  // nvmlProcessInfo_t (v2/v3)
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};
FAKE_EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count,
                                                        FakeNvmlProcess* infos);

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

// One handle per GPU for the process's life, as NVML's are: a handle made
// at every call would leak (the sanitizer builds fail on leaks at exit).
FAKE_EXPORT int nvmlDeviceGetHandleByUUID(const char* uuid, void** device)
{
    static char handles[16][128];
    if (uuid == nullptr || device == nullptr || size_of(uuid) == 0 ||
        strlen(uuid) >= sizeof handles[0])
        return 6;  // NVML_ERROR_NOT_FOUND
    for (char* h : handles)
        if (h[0] == '\0' || strcmp(h, uuid) == 0) {
            if (h[0] == '\0')
                strcpy(h, uuid);
            *device = h;
            return 0;
        }
    return 6;  // more GPUs than a test names
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

FAKE_EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count,
                                                        FakeNvmlProcess* infos)
{
    if (device == nullptr || count == nullptr)
        return 2;  // NVML_ERROR_INVALID_ARGUMENT
    if (const char* delay = getenv("FAKENVML_PROCESSES_DELAY_MS"))
        usleep(static_cast<useconds_t>(strtoul(delay, nullptr, 10) * 1000));
    const char* path = getenv("FAKENVML_PROCESSES");
    FILE* f = path != nullptr ? fopen(path, "r") : nullptr;
    unsigned int n = 0;
    char uuid[128];
    unsigned int pid = 0;
    unsigned long long bytes = 0;
    while (f != nullptr && fscanf(f, "%127s %u %llu", uuid, &pid, &bytes) == 3) {
        if (strcmp(uuid, static_cast<const char*>(device)) != 0)
            continue;
        if (n < *count && infos != nullptr)
            infos[n] = FakeNvmlProcess{pid, bytes, ~0u, ~0u};
        ++n;
    }
    if (f != nullptr)
        fclose(f);
    const bool fits = n <= *count;
    *count = n;
    return fits ? 0 : 7;  // NVML_ERROR_INSUFFICIENT_SIZE
}
