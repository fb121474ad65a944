#include "preload/memory/devices.h"

#include <pthread.h>

#include <cstring>

#include "preload/driver/hook_table.h"
#include "preload/env.h"
#include "preload/log.h"
#include "preload/mailbox.h"

namespace nvshare::preload::devices {

namespace {

Gpu g_gpus[kMaxGpus];
std::atomic<uint32_t> g_count{0};
std::atomic<uint32_t> g_generation{0};
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;

// The granularity of swappable memory on `ordinal`, or 0 where the driver
// lacks what the swap engine needs: VMM memory on the device, VMM memory on
// the host (what a swapped-out chunk is backed by), with one granularity
// that suits both.
uint64_t swap_granularity_of(CUdevice ordinal)
{
    auto get_attribute = NVS_REAL(cuDeviceGetAttribute);
    auto granularity = NVS_REAL(cuMemGetAllocationGranularity);
    if (get_attribute == nullptr || granularity == nullptr)
        return 0;
    int vmm = 0, host_vmm = 0;
    if (get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, ordinal) !=
            CUDA_SUCCESS ||
        get_attribute(&host_vmm, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                      ordinal) != CUDA_SUCCESS ||
        vmm == 0 || host_vmm == 0)
        return 0;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    size_t device = 0, host = 0;
    if (granularity(&device, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS)
        return 0;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
    if (granularity(&host, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
        return 0;
    const uint64_t g = device > host ? device : host;
    // Powers of two, one a multiple of the other: the larger suits both.
    if (device == 0 || host == 0 || (g & (g - 1)) != 0 || g % device != 0 || g % host != 0)
        return 0;
    return g;
}

int find(CUdevice ordinal)
{
    const uint32_t n = g_count.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < n; ++i)
        if (g_gpus[i].ordinal == ordinal)
            return static_cast<int>(i);
    return -1;
}

}  // namespace

int index_of(CUdevice ordinal, bool add)
{
    int i = find(ordinal);
    if (i >= 0 || !add)
        return i;
    auto get_uuid = NVS_REAL(cuDeviceGetUuid_v2);
    auto get_memory = NVS_REAL(cuDeviceTotalMem_v2);
    auto get_name = NVS_REAL(cuDeviceGetName);
    CUuuid uuid{};
    size_t memory = 0;
    if (get_uuid == nullptr || get_memory == nullptr || get_uuid(&uuid, ordinal) != CUDA_SUCCESS ||
        get_memory(&memory, ordinal) != CUDA_SUCCESS)
        return -1;
    char name[proto::kGpuNameBytes] = {};
    if (get_name == nullptr || get_name(name, sizeof name - 1, ordinal) != CUDA_SUCCESS)
        name[0] = '\0';
    // Without it, the CPU touching managed memory while a kernel runs
    // faults: rewriting cudaMalloc would break correct programs. Unknown
    // (no answer): as before, managed.
    auto get_attribute = NVS_REAL(cuDeviceGetAttribute);
    int concurrent = 1;
    if (get_attribute == nullptr ||
        get_attribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, ordinal) !=
            CUDA_SUCCESS)
        concurrent = 1;
    const uint64_t swap_granularity = swap_granularity_of(ordinal);

    bool added = false;
    pthread_mutex_lock(&g_mutex);
    i = find(ordinal);
    if (i < 0) {
        const uint32_t n = g_count.load(std::memory_order_relaxed);
        if (n < kMaxGpus) {
            Gpu& g = g_gpus[n];
            g.ordinal = ordinal;
            memcpy(g.uuid, uuid.bytes, sizeof g.uuid);
            g.physical_memory = memory;
            memcpy(g.name, name, sizeof g.name);
            g.concurrent_managed = concurrent != 0;
            g.swap_granularity = swap_granularity;
            g.capacity.store(0);
            g.managed.store(0);
            g.pinned.store(0);
            g.others_pinned.store(0);
            g.graph_pool.store(0);
            g.dirty.store(false);
            g_count.store(n + 1, std::memory_order_release);
            g_generation.fetch_add(1, std::memory_order_acq_rel);
            i = static_cast<int>(n);
            added = true;
        } else {
            log_warn("more than %u GPUs in one process: GPU %d is not scheduled", kMaxGpus,
                     ordinal);
        }
    }
    pthread_mutex_unlock(&g_mutex);
    if (added && concurrent == 0 && config().managed)
        log_warn(
            "GPU %d has no concurrent managed access "
            "(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS=0): device memory allocated on it "
            "stays plain device memory, accounted as resident (it cannot be paged out)",
            ordinal);
    if (i >= 0)
        mailbox::poke();
    return i;
}

uint32_t count()
{
    return g_count.load(std::memory_order_acquire);
}

uint32_t generation()
{
    return g_generation.load(std::memory_order_acquire);
}

Gpu& at(uint32_t index)
{
    return g_gpus[index];
}

uint64_t capacity(uint32_t index)
{
    const uint64_t c = g_gpus[index].capacity.load(std::memory_order_acquire);
    return c != 0 ? c : g_gpus[index].physical_memory;
}

uint64_t used(uint32_t index)
{
    const int64_t m = g_gpus[index].managed.load(std::memory_order_acquire);
    const int64_t p = g_gpus[index].pinned.load(std::memory_order_acquire);
    const int64_t sum = m + p;
    return sum > 0 ? static_cast<uint64_t>(sum) : 0;
}

uint64_t available(uint32_t index)
{
    const uint64_t cap = capacity(index);
    const uint64_t taken =
        used(index) + g_gpus[index].others_pinned.load(std::memory_order_acquire);
    return cap > taken ? cap - taken : 0;
}

void add_usage(uint32_t index, Kind kind, int64_t delta)
{
    Gpu& g = g_gpus[index];
    (kind == Kind::Managed ? g.managed : g.pinned).fetch_add(delta, std::memory_order_acq_rel);
    // One wake-up per report period, not one per allocation.
    if (!g.dirty.exchange(true, std::memory_order_acq_rel))
        mailbox::poke();
}

void reset_after_fork()
{
    pthread_mutex_init(&g_mutex, nullptr);
    g_count.store(0);
    g_generation.fetch_add(1);
}

}  // namespace nvshare::preload::devices
