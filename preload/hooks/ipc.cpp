// What managed memory cannot do. CUDA IPC and GPUDirect RDMA (dma-buf export,
// nvidia-peermem's peer-memory tokens) are defined for cuMemAlloc memory
// only. A program that shares device memory with another process
// (torch.multiprocessing, custom all-reduce) or hands it to a network card
// (MPI, UCX, NCCL's network plugins) would get a bare error from the driver,
// or silently take a slower path: it gets the reason and the way out on
// stderr instead, once per path. Every call goes to the driver unchanged and
// returns what it answers; the library looks only at failures (and at a
// "not RDMA-capable" answer), so programs that never lose a path pay nothing.
// The swap engine's memory is answered for as cuMemAlloc memory is (the
// driver sees chunks, each a buffer of its own, mapped or not, on the device
// or in host memory): pointer attributes and address ranges that the
// engine knows come from it, without asking the driver or for the GPU.
#include <atomic>

#include "preload/driver/hook_table.h"
#include "preload/env.h"
#include "preload/exclusion.h"
#include "preload/lock/lock.h"
#include "preload/log.h"
#include "preload/memory/allocations.h"
#include "preload/swap/swappable.h"

namespace {

std::atomic<bool> g_explained_ipc{false};
std::atomic<bool> g_explained_gpudirect{false};

// The start of the allocation `ptr` points into (programs pass any address
// of a buffer), as the driver knows it; `ptr` itself if it does not say.
CUdeviceptr allocation_start(CUdeviceptr ptr)
{
    auto get = NVS_REAL(cuPointerGetAttribute);
    nvshare::preload::swappable::Described d{};
    if (nvshare::preload::swappable::describe(ptr, &d))
        return d.start;
    CUdeviceptr start = 0;
    if (get == nullptr || get(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr) != CUDA_SUCCESS ||
        start == 0)
        return ptr;
    return start;
}

// One line per process and path: what was lost on `ptr` (if nvshare made
// that memory managed) and the two ways to keep the memory plain.
void explain(std::atomic<bool>& once, CUdeviceptr ptr, const char* lost)
{
    if (once.load(std::memory_order_relaxed) ||
        !nvshare::preload::alloc::made_managed(allocation_start(ptr)) || once.exchange(true))
        return;
    nvshare::preload::log_warn(
        "%s: nvshare made this process's device memory swappable or managed; set "
        "NVSHARE_MANAGED=0 for it "
        "(or list the program in %s) to keep plain device memory (still scheduled by nvshare)",
        lost, nvshare_plain_list_path);
}

// The attributes of a pointer that managed memory loses.
bool lost_attribute(CUpointer_attribute attribute, CUresult r, const void* data)
{
    if (attribute == CU_POINTER_ATTRIBUTE_P2P_TOKENS)
        return r != CUDA_SUCCESS;
    if (attribute == CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE)
        return r == CUDA_SUCCESS && data != nullptr && *static_cast<const int*>(data) == 0;
    return false;
}

const char* attribute_loss(CUpointer_attribute attribute)
{
    return attribute == CU_POINTER_ATTRIBUTE_P2P_TOKENS
               ? "GPUDirect RDMA cannot use this memory (no peer-memory tokens, "
                 "CU_POINTER_ATTRIBUTE_P2P_TOKENS)"
               : "GPUDirect RDMA cannot use this memory "
                 "(CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE is 0: the program may fall "
                 "back to a slower path through host memory)";
}

// The swap engine's memory, made while the process did not hold the GPU,
// has only its address until the next grant: the driver would not know the
// pointer. A question about it waits for the grant, as GPU work does.
void ensure_backed(CUdeviceptr ptr)
{
    if (nvshare::preload::swappable::absent_at(ptr)) {
        nvshare::preload::lock::enter(nullptr, 0);
        nvshare::preload::lock::leave();
    }
}

// Whether the engine answers `attribute` of its memory itself.
bool engine_answers(CUpointer_attribute attribute)
{
    switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT:
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            return true;
        default:
            return false;
    }
}

// Writes `attribute` of the memory `d` describes, as the driver answers for
// cuMemAlloc memory.
void answer(const nvshare::preload::swappable::Described& d, CUpointer_attribute attribute,
            void* data, CUdeviceptr ptr)
{
    switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            *static_cast<CUcontext*>(data) = d.context;
            break;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            *static_cast<CUdeviceptr*>(data) = ptr;
            break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            *static_cast<unsigned long long*>(data) = d.buffer_id;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *static_cast<int*>(data) = d.ordinal;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *static_cast<CUdeviceptr*>(data) = d.start;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *static_cast<size_t*>(data) = d.bytes;
            break;
        default:
            break;
    }
}

}  // namespace

NVS_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr)
{
    auto real = NVS_REAL(cuMemGetAddressRange_v2);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    nvshare::preload::swappable::Described d{};
    if (!nvshare::preload::swappable::describe(dptr, &d))
        return real(pbase, psize, dptr);
    if (pbase != nullptr)
        *pbase = d.start;
    if (psize != nullptr)
        *psize = d.bytes;
    return CUDA_SUCCESS;
}

NVS_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr)
{
    auto real = NVS_REAL(cuIpcGetMemHandle);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    const CUresult r = real(pHandle, dptr);
    if (r != CUDA_SUCCESS)
        explain(g_explained_ipc, dptr, "CUDA IPC cannot share this memory");
    return r;
}

NVS_EXPORT CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                  CUmemRangeHandleType handleType,
                                                  unsigned long long flags)
{
    auto real = NVS_REAL(cuMemGetHandleForAddressRange);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    const CUresult r = real(handle, dptr, size, handleType, flags);
    if (r != CUDA_SUCCESS)
        explain(g_explained_gpudirect, dptr,
                "GPUDirect RDMA cannot use this memory (no dma-buf export, "
                "cuMemGetHandleForAddressRange)");
    return r;
}

NVS_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                          CUdeviceptr ptr)
{
    auto real = NVS_REAL(cuPointerGetAttribute);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    nvshare::preload::swappable::Described d{};
    if (data != nullptr && engine_answers(attribute) &&
        nvshare::preload::swappable::describe(ptr, &d)) {
        answer(d, attribute, data, ptr);
        return CUDA_SUCCESS;
    }
    ensure_backed(ptr);
    const CUresult r = real(data, attribute, ptr);
    if (lost_attribute(attribute, r, data))
        explain(g_explained_gpudirect, ptr, attribute_loss(attribute));
    return r;
}

NVS_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes,
                                           CUpointer_attribute* attributes, void** data,
                                           CUdeviceptr ptr)
{
    auto real = NVS_REAL(cuPointerGetAttributes);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    nvshare::preload::swappable::Described d{};
    const bool ours =
        attributes != nullptr && data != nullptr && nvshare::preload::swappable::describe(ptr, &d);
    bool all_ours = ours;
    for (unsigned int i = 0; all_ours && i < numAttributes; ++i)
        all_ours = data[i] != nullptr && engine_answers(attributes[i]);
    // The driver answers the rest (for memory swapped out, once it is back).
    const CUresult r =
        all_ours ? CUDA_SUCCESS : (ensure_backed(ptr), real(numAttributes, attributes, data, ptr));
    if (attributes == nullptr || data == nullptr)
        return r;
    for (unsigned int i = 0; ours && i < numAttributes && r == CUDA_SUCCESS; ++i)
        if (data[i] != nullptr && engine_answers(attributes[i]))
            answer(d, attributes[i], data[i], ptr);
    for (unsigned int i = 0; i < numAttributes; ++i) {
        if (lost_attribute(attributes[i], r, data[i])) {
            explain(g_explained_gpudirect, ptr, attribute_loss(attributes[i]));
            break;
        }
    }
    return r;
}
