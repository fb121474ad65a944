// cuMemAlloc/cuMemAllocPitch become swappable memory of the swap engine
// (swap/swappable.h; small ones blocks of its slabs) or managed allocations, so system memory backs
// what does not fit on the GPU; every allocation kind is accounted per GPU and reported to nvshared
// (swappable and managed: pageable; async/pool/VMM: pinned).
#include <atomic>
#include <cstring>

#include "preload/driver/hook_table.h"
#include "preload/env.h"
#include "preload/lock/lock.h"
#include "preload/log.h"
#include "preload/mailbox.h"
#include "preload/memory/allocations.h"
#include "preload/memory/array_size.h"
#include "preload/memory/contexts.h"
#include "preload/memory/devices.h"
#include "preload/swap/residency.h"
#include "preload/swap/swap_plan.h"
#include "preload/swap/swappable.h"

namespace nvshare::preload::alloc {

namespace {

using devices::Kind;

std::atomic<bool> g_warned_unmanaged{false};

constexpr size_t kPitchAlignment = 512;
// Give the first allocation a chance to learn nvshared's capacity.
constexpr int kReadyTimeoutMs = 2000;

// The GPU an allocation lands on, registered, with the daemon connection
// started (and its settings awaited, briefly) on the first allocation.
int prepare(int ordinal)
{
    if (ordinal < 0)
        return -1;
    const int gpu = devices::index_of(ordinal, true);
    if (gpu >= 0)
        lock::start_client(kReadyTimeoutMs);
    return gpu;
}

int prepare_current()
{
    contexts::note_current();
    return prepare(contexts::current_device());
}

// A single process may not allocate beyond the GPU's capacity, as with
// plain device memory, unless NVSHARE_ENABLE_SINGLE_OVERSUB=1.
bool over_limit(int gpu, uint64_t bytes)
{
    if (config().single_oversub)
        return false;
    const uint64_t cap = devices::capacity(static_cast<uint32_t>(gpu));
    const uint64_t used = devices::used(static_cast<uint32_t>(gpu));
    if (used + bytes <= cap && used + bytes >= used)
        return false;
    log_debug(
        "refusing %llu bytes on GPU %d: %llu of %llu in use "
        "(NVSHARE_ENABLE_SINGLE_OVERSUB=1 allows it)",
        static_cast<unsigned long long>(bytes), devices::at(static_cast<uint32_t>(gpu)).ordinal,
        static_cast<unsigned long long>(used), static_cast<unsigned long long>(cap));
    return true;
}

// Device memory stays plain where the process keeps plain memory
// (NVSHARE_MANAGED=0, the admin's plain-memory list) or the GPU cannot let
// the CPU and itself use managed memory at once.
bool keep_plain(int gpu)
{
    return !config().managed || !devices::at(static_cast<uint32_t>(gpu)).concurrent_managed;
}

// Managed allocation in place of device memory; plain device memory where
// the GPU cannot do managed memory or keep_plain().
CUresult allocate_managed(CUdeviceptr* dptr, size_t bytes, int gpu)
{
    auto managed = NVS_REAL(cuMemAllocManaged);
    auto plain = NVS_REAL(cuMemAlloc_v2);
    if (keep_plain(gpu) && plain != nullptr) {
        const CUresult r = plain(dptr, bytes);
        if (r == CUDA_SUCCESS)
            track(Table::Pointers, *dptr, bytes, gpu, Kind::Pinned);
        return r;
    }
    CUresult r =
        managed != nullptr ? managed(dptr, bytes, CU_MEM_ATTACH_GLOBAL) : CUDA_ERROR_NOT_SUPPORTED;
    Kind kind = Kind::Managed;
    if (r == CUDA_ERROR_NOT_SUPPORTED && plain != nullptr) {
        if (!g_warned_unmanaged.exchange(true))
            log_warn("this GPU has no managed memory: allocations stay in device memory");
        r = plain(dptr, bytes);
        kind = Kind::Pinned;
    }
    if (r == CUDA_SUCCESS)
        track(Table::Pointers, *dptr, bytes, gpu, kind, kind == Kind::Managed);
    return r;
}

// No allocation returns memory without memory behind it (the invariant,
// preload/README.md): work that reached it past the gate (a tool's
// trampoline, a driver call the library does not know) would find an
// unmapped address, which on a GPU loses the process's CUDA for good. So the
// call waits at the gate as the program's work would: the gate opens only
// through lock::open_gate, which maps every chunk first (on the device, or
// in host memory where the room never came). Not holding the GPU, it waits
// for the grant; sharing it, for a grant with room (the client thread lets
// go and asks again); holding it alone, for the room others give back.
void wait_until_mapped(swappable::Unmapped unmapped)
{
    switch (unmapped) {
        case swappable::Unmapped::None:
            return;
        case swappable::Unmapped::UntilGrant:
            break;
        case swappable::Unmapped::UntilSharedGrant:
            gate_close();
            mailbox::want_yield();
            break;
        case swappable::Unmapped::UntilRoom:
            gate_close();
            mailbox::want_room();
            break;
    }
    lock::enter(nullptr, 0);
    lock::leave();
}

// What the program asked for as device memory: swappable memory (below the
// granularity, a block of a slab of it) where the hybrid rule says so
// (swap_plan::choose_backing), managed memory (or plain, see
// allocate_managed) otherwise and wherever the engine cannot give it.
CUresult allocate_rewritten(CUdeviceptr* dptr, size_t bytes, int gpu)
{
    const PendingWork allocating(true);  // not a pause: the holder keeps the GPU
    if (!keep_plain(gpu)) {
        const auto index = static_cast<uint32_t>(gpu);
        swap_plan::BackingFacts f;
        f.engine_on = config().swap_engine;
        f.granularity = devices::at(index).swap_granularity;
        f.gpu_supports = f.granularity != 0;
        f.bytes = bytes;
        f.beyond_capacity = devices::used(index) + bytes > devices::capacity(index);
        const swap_plan::Backing backing = swap_plan::choose_backing(f);
        if (backing != swap_plan::Backing::Managed) {
            // A lost context: the answer cuMemAlloc gives (the VMM calls
            // below would succeed and hide it).
            if (const CUresult lost = contexts::lost_error(); lost != CUDA_SUCCESS)
                return lost;
            uint64_t reserved = 0;
            swappable::Unmapped unmapped = swappable::Unmapped::None;
            // A small allocation is a block of a slab, whose memory the
            // engine counts while the slab lives (what the GPU holds): its
            // entry, for cuMemFree to find, counts nothing.
            const bool small = backing == swap_plan::Backing::Small;
            const CUresult r =
                small ? swappable::allocate_small(
                            dptr, bytes, index, &unmapped,
                            residency::room_will_come(index, swap_plan::small_slab(f.granularity)))
                      : swappable::allocate(dptr, bytes, index, &reserved, &unmapped,
                                            residency::room_will_come(index, bytes));
            if (r == CUDA_SUCCESS) {
                track(Table::Pointers, *dptr, reserved, gpu, Kind::Managed, true, true);
                wait_until_mapped(unmapped);
                return CUDA_SUCCESS;
            }
            // Neither the GPU nor host memory within the budget has room: out
            // of memory, as the driver says where the GPU is full. Managed
            // memory instead would fault on a GPU full of memory the driver
            // cannot evict (an illegal address).
            if (r == CUDA_ERROR_OUT_OF_MEMORY) {
                log_warn(
                    "out of memory: %llu bytes found no room on GPU %d nor in the host "
                    "memory nvshare may pin (a quarter of what is available above a "
                    "reserve of 1/32 of the host's memory)",
                    static_cast<unsigned long long>(bytes), devices::at(index).ordinal);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            // Any other driver error (a sticky one after a fault, a bad
            // context) is the answer, as cuMemAlloc would give it; only a
            // GPU without VMM goes on to managed memory.
            if (r != CUDA_ERROR_NOT_SUPPORTED)
                return r;
        }
    }
    return allocate_managed(dptr, bytes, gpu);
}

bool is_device_location(const CUmemAllocationProp* prop)
{
    return prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
}

}  // namespace

// Stream-ordered allocations (plain and from a pool) share this logic.
template <typename Call>
CUresult allocate_async(CUdeviceptr* dptr, size_t bytes, CUstream stream, int per_thread, Call call)
{
    if (config().disabled)
        return call();
    // Inside a capture this becomes graph memory, counted from the pool.
    if (contexts::stream_capturing(per_thread != 0 && stream == nullptr ? CU_STREAM_PER_THREAD
                                                                        : stream)) {
        const CUresult r = call();
        if (r == CUDA_SUCCESS)
            note_graph_memory();
        return r;
    }
    const int gpu = prepare_current();
    if (gpu < 0)
        return call();
    if (over_limit(gpu, bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    const CUresult r = call();
    if (r == CUDA_SUCCESS && dptr != nullptr)
        track(Table::Pointers, *dptr, bytes, gpu, Kind::Pinned);
    return r;
}

}  // namespace nvshare::preload::alloc

// ---- exported wrappers ---------------------------------------------------------

using namespace nvshare::preload::alloc;  // NOLINT: the wrappers below are thin
using nvshare::preload::config;

#define NVS_REQUIRE(var, name) \
    auto var = NVS_REAL(name); \
    if (var == nullptr)        \
    return CUDA_ERROR_NOT_FOUND

NVS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize)
{
    NVS_REQUIRE(real, cuMemAlloc_v2);
    if (config().disabled || dptr == nullptr || bytesize == 0)
        return real(dptr, bytesize);
    const int gpu = prepare_current();
    if (gpu < 0)
        return real(dptr, bytesize);  // no context: the driver reports it
    if (over_limit(gpu, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    return allocate_rewritten(dptr, bytesize, gpu);
}

NVS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                       size_t Height, unsigned int ElementSizeBytes)
{
    NVS_REQUIRE(real, cuMemAllocPitch_v2);
    const bool valid = dptr != nullptr && pPitch != nullptr && WidthInBytes != 0 && Height != 0 &&
                       (ElementSizeBytes == 4 || ElementSizeBytes == 8 || ElementSizeBytes == 16);
    if (config().disabled || !valid)
        return real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    const size_t pitch = (WidthInBytes + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
    if (pitch < WidthInBytes || Height > SIZE_MAX / pitch)
        return CUDA_ERROR_INVALID_VALUE;
    const size_t bytes = pitch * Height;
    const int gpu = prepare_current();
    if (gpu < 0)
        return real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (over_limit(gpu, bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (keep_plain(gpu)) {
        // Plain memory: the driver's own pitch, accounted as resident.
        const CUresult r = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        if (r == CUDA_SUCCESS)
            track(Table::Pointers, *dptr, *pPitch * Height, gpu, Kind::Pinned);
        return r;
    }
    const CUresult r = allocate_rewritten(dptr, bytes, gpu);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

namespace {

// Frees swap-engine memory (untracked already).
CUresult free_swappable(CUdeviceptr dptr)
{
    const nvshare::preload::PendingWork freeing(true);
    // As cuMemFree does: work still using the memory finishes first. That is
    // the work of every context of the process (another thread's, another
    // GPU's reading it as a peer), not only the caller's. Inside a capture,
    // where synchronising is illegal, the memory stays mapped until a later
    // wait for all the work (a drain, the next cuMemFree).
    namespace swappable = nvshare::preload::swappable;
    const size_t deferred = swappable::deferred_frees();
    CUresult failed = CUDA_SUCCESS;
    const bool waited = nvshare::preload::contexts::sync_all(&failed);
    swappable::free_allocation(dptr, !waited);
    if (waited)
        swappable::finish_frees(deferred);
    return failed;  // the program's own sticky error, as cuMemFree reports it
}

// Frees memory the program allocated, with one look at the table: the swap
// engine's as cuMemFree frees it, the rest by `call` (the driver), tracked
// again where the driver refused.
template <typename Call>
CUresult free_device(CUdeviceptr dptr, Call call)
{
    nvshare::preload::AllocTable::Entry e{};
    const bool found = untrack(Table::Pointers, dptr, &e);
    if (found && e.swappable)
        return free_swappable(dptr);
    const CUresult r = call();
    if (r != CUDA_SUCCESS && found)
        retrack(Table::Pointers, e);
    return r;
}

}  // namespace

NVS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    NVS_REQUIRE(real, cuMemFree_v2);
    return free_device(dptr, [&] { return real(dptr); });
}

NVS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags)
{
    NVS_REQUIRE(real, cuMemAllocManaged);
    if (config().disabled)
        return real(dptr, bytesize, flags);
    const int gpu = prepare_current();
    const CUresult r = real(dptr, bytesize, flags);
    if (r == CUDA_SUCCESS && gpu >= 0)
        track(Table::Pointers, *dptr, bytesize, gpu, nvshare::preload::devices::Kind::Managed);
    return r;
}

namespace {

template <typename Real>
CUresult alloc_async(Real real, int per_thread, CUdeviceptr* dptr, size_t bytesize,
                     CUstream hStream)
{
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    return allocate_async(dptr, bytesize, hStream, per_thread,
                          [&] { return real(dptr, bytesize, hStream); });
}

template <typename Real>
CUresult alloc_from_pool_async(Real real, int per_thread, CUdeviceptr* dptr, size_t bytesize,
                               CUmemoryPool pool, CUstream hStream)
{
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    return allocate_async(dptr, bytesize, hStream, per_thread,
                          [&] { return real(dptr, bytesize, pool, hStream); });
}

template <typename Real>
CUresult free_async(Real real, int /*per_thread*/, CUdeviceptr dptr, CUstream hStream)
{
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    // cuMemAlloc memory freed in stream order (the driver accepts it): the
    // swap engine's is freed as cuMemFree frees it, once all the work that
    // may use it has ended, which the stream's order implies.
    return free_device(dptr, [&] { return real(dptr, hStream); });
}

}  // namespace

// clang-format off
NVS_PER_THREAD_PAIR(cuMemAllocAsync, alloc_async,
                    (CUdeviceptr* dptr, size_t bytesize, CUstream hStream),
                    (dptr, bytesize, hStream))
NVS_PER_THREAD_PAIR(cuMemAllocFromPoolAsync, alloc_from_pool_async,
                    (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
                    (dptr, bytesize, pool, hStream))
NVS_PER_THREAD_PAIR(cuMemFreeAsync, free_async,
                    (CUdeviceptr dptr, CUstream hStream),
                    (dptr, hStream))
// clang-format on

// VMM memory cannot be managed and is never evicted: accounted as pinned.
NVS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                const CUmemAllocationProp* prop, unsigned long long flags)
{
    NVS_REQUIRE(real, cuMemCreate);
    if (config().disabled || !is_device_location(prop) || handle == nullptr)
        return real(handle, size, prop, flags);
    const int gpu = prepare(prop->location.id);
    if (gpu < 0)
        return real(handle, size, prop, flags);
    if (over_limit(gpu, size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    const CUresult r = real(handle, size, prop, flags);
    if (r == CUDA_SUCCESS)
        track(Table::Handles, *handle, size, gpu, nvshare::preload::devices::Kind::Pinned);
    return r;
}

// A retained handle is the same value: count the reference, so that the
// first release does not uncount memory still mapped.
NVS_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr)
{
    NVS_REQUIRE(real, cuMemRetainAllocationHandle);
    const CUresult r = real(handle, addr);
    if (r != CUDA_SUCCESS || handle == nullptr || config().disabled)
        return r;
    retain_handle(*handle);
    return r;
}

NVS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    NVS_REQUIRE(real, cuMemRelease);
    nvshare::preload::AllocTable::Entry refs{};
    if (take_handle_refs(handle, &refs)) {
        const CUresult r = real(handle);
        put_handle_refs(handle, r == CUDA_SUCCESS ? refs.size - 1 : refs.size, refs);
        return r;
    }
    nvshare::preload::AllocTable::Entry e{};
    const bool found = untrack(Table::Handles, handle, &e);
    const CUresult r = real(handle);
    if (r != CUDA_SUCCESS && found)
        retrack(Table::Handles, e);
    return r;
}

// CUDA arrays (textures, surfaces) are device memory that cannot be managed:
// counted as pinned, their size taken from the descriptor.
template <typename Call>
CUresult create_array(void* handle_out, uint64_t bytes, Call call)
{
    if (config().disabled || handle_out == nullptr)
        return call();
    const int gpu = prepare_current();
    if (gpu < 0)
        return call();
    if (over_limit(gpu, bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    const CUresult r = call();
    if (r == CUDA_SUCCESS) {
        uint64_t key = 0;
        memcpy(&key, handle_out, sizeof key);
        track(Table::Arrays, key, bytes, gpu, nvshare::preload::devices::Kind::Pinned);
    }
    return r;
}

template <typename Call>
CUresult destroy_array(uint64_t key, Call call)
{
    nvshare::preload::AllocTable::Entry e{};
    const bool found = untrack(Table::Arrays, key, &e);
    const CUresult r = call();
    if (r != CUDA_SUCCESS && found)
        retrack(Table::Arrays, e);
    return r;
}

NVS_EXPORT CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* d)
{
    NVS_REQUIRE(real, cuArrayCreate_v2);
    if (d == nullptr)
        return real(pHandle, d);
    const uint64_t bytes =
        nvshare::preload::array_bytes(d->Format, d->NumChannels, d->Width, d->Height, 0);
    return create_array(pHandle, bytes, [&] { return real(pHandle, d); });
}

NVS_EXPORT CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* d)
{
    NVS_REQUIRE(real, cuArray3DCreate_v2);
    if (d == nullptr)
        return real(pHandle, d);
    const uint64_t bytes =
        nvshare::preload::array_bytes(d->Format, d->NumChannels, d->Width, d->Height, d->Depth);
    return create_array(pHandle, bytes, [&] { return real(pHandle, d); });
}

NVS_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                           const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned int levels)
{
    NVS_REQUIRE(real, cuMipmappedArrayCreate);
    if (d == nullptr)
        return real(pHandle, d, levels);
    const uint64_t bytes = nvshare::preload::mipmapped_array_bytes(
        d->Format, d->NumChannels, d->Width, d->Height, d->Depth, levels);
    return create_array(pHandle, bytes, [&] { return real(pHandle, d, levels); });
}

NVS_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    NVS_REQUIRE(real, cuArrayDestroy);
    return destroy_array(reinterpret_cast<uint64_t>(hArray), [&] { return real(hArray); });
}

NVS_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hArray)
{
    NVS_REQUIRE(real, cuMipmappedArrayDestroy);
    return destroy_array(reinterpret_cast<uint64_t>(hArray), [&] { return real(hArray); });
}

NVS_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                           const CUgraphNode* dependencies, size_t numDependencies,
                                           CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams)
{
    NVS_REQUIRE(real, cuGraphAddMemAllocNode);
    const CUresult r = real(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
    if (r == CUDA_SUCCESS && !config().disabled)
        note_graph_memory();
    return r;
}

// The GPU as nvshared shares it: its capacity, less what this process uses
// and what other processes pin there (their managed memory can make room).
NVS_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total)
{
    NVS_REQUIRE(real, cuMemGetInfo_v2);
    const CUresult r = real(free, total);
    if (r != CUDA_SUCCESS || config().disabled || free == nullptr || total == nullptr)
        return r;
    const int ordinal = nvshare::preload::contexts::current_device();
    const int gpu = ordinal >= 0 ? nvshare::preload::devices::index_of(ordinal, true) : -1;
    if (gpu < 0)
        return r;
    *total = nvshare::preload::devices::capacity(static_cast<uint32_t>(gpu));
    *free = nvshare::preload::devices::available(static_cast<uint32_t>(gpu));
    return r;
}

NVS_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev)
{
    NVS_REQUIRE(real, cuDeviceTotalMem_v2);
    const CUresult r = real(bytes, dev);
    if (r != CUDA_SUCCESS || config().disabled || bytes == nullptr)
        return r;
    const int gpu = nvshare::preload::devices::index_of(dev, false);
    if (gpu >= 0)
        *bytes = nvshare::preload::devices::capacity(static_cast<uint32_t>(gpu));
    return r;
}
