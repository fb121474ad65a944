// CUDA IPC cannot export managed memory. A program that shares device memory
// with another process (torch.multiprocessing, custom all-reduce) would get a
// bare "invalid value" from the driver: it gets the reason and the way out
// on stderr instead, once.
#include <atomic>

#include "preload/alloc.h"
#include "preload/env.h"
#include "preload/hook_table.h"
#include "preload/log.h"

namespace {

std::atomic<bool> g_explained{false};

}  // namespace

NVS_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr)
{
    auto real = NVS_REAL(cuIpcGetMemHandle);
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    const CUresult r = real(pHandle, dptr);
    if (r != CUDA_SUCCESS && nvshare::preload::alloc::made_managed(dptr) &&
        !g_explained.exchange(true))
        nvshare::preload::log_warn(
            "CUDA IPC cannot share this memory: nvshare made this process's device memory "
            "managed; set NVSHARE_MANAGED=0 for it to keep plain device memory (still "
            "scheduled by nvshare)");
    return r;
}
