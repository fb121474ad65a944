// What managed memory cannot do. CUDA IPC and GPUDirect RDMA (dma-buf export,
// nvidia-peermem's peer-memory tokens) are defined for cuMemAlloc memory
// only. A program that shares device memory with another process
// (torch.multiprocessing, custom all-reduce) or hands it to a network card
// (MPI, UCX, NCCL's network plugins) would get a bare error from the driver,
// or silently take a slower path: it gets the reason and the way out on
// stderr instead, once per path. Every call goes to the driver unchanged and
// returns what it answers; the library looks only at failures (and at a
// "not RDMA-capable" answer), so programs that never lose a path pay nothing.
// The swap engine's memory is answered for as one allocation, as cuMemAlloc
// memory is (the driver sees its chunks).
#include <atomic>

#include "preload/driver/hook_table.h"
#include "preload/env.h"
#include "preload/exclusion.h"
#include "preload/lock/lock.h"
#include "preload/log.h"
#include "preload/memory/allocations.h"
#include "preload/memory/swappable.h"

namespace {

std::atomic<bool> g_explained_ipc{false};
std::atomic<bool> g_explained_gpudirect{false};

// The start of the allocation `ptr` points into (programs pass any address
// of a buffer), as the driver knows it; `ptr` itself if it does not say.
CUdeviceptr allocation_start(CUdeviceptr ptr)
{
    auto get = NVS_REAL(cuPointerGetAttribute);
    CUdeviceptr start = 0;
    uint64_t bytes = 0;
    if (nvshare::preload::swappable::range_of(ptr, &start, &bytes))
        return start;
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

// The driver sees a swappable allocation as chunks: its range is the
// allocation's, as for cuMemAlloc memory.
void fix_range(CUpointer_attribute attribute, void* data, CUdeviceptr ptr)
{
    CUdeviceptr start = 0;
    uint64_t bytes = 0;
    if (data == nullptr ||
        (attribute != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR &&
         attribute != CU_POINTER_ATTRIBUTE_RANGE_SIZE) ||
        !nvshare::preload::swappable::range_of(ptr, &start, &bytes))
        return;
    if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *static_cast<CUdeviceptr*>(data) = start;
    else
        *static_cast<size_t*>(data) = bytes;
}

}  // namespace

NVS_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr)
{
    auto real = NVS_REAL(cuMemGetAddressRange_v2);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    CUdeviceptr start = 0;
    uint64_t bytes = 0;
    if (!nvshare::preload::swappable::range_of(dptr, &start, &bytes))
        return real(pbase, psize, dptr);
    if (pbase != nullptr)
        *pbase = start;
    if (psize != nullptr)
        *psize = bytes;
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
    ensure_backed(ptr);
    const CUresult r = real(data, attribute, ptr);
    if (r == CUDA_SUCCESS)
        fix_range(attribute, data, ptr);
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
    ensure_backed(ptr);
    const CUresult r = real(numAttributes, attributes, data, ptr);
    if (attributes == nullptr || data == nullptr)
        return r;
    for (unsigned int i = 0; i < numAttributes && r == CUDA_SUCCESS; ++i)
        fix_range(attributes[i], data[i], ptr);
    for (unsigned int i = 0; i < numAttributes; ++i) {
        if (lost_attribute(attributes[i], r, data[i])) {
            explain(g_explained_gpudirect, ptr, attribute_loss(attributes[i]));
            break;
        }
    }
    return r;
}
