// Routes (b) dlopen + dlsym(handle, "cu...") and (c) cuGetProcAddress_v2.
#include "api.h"

#include <dlfcn.h>

#include <initializer_list>
#include <utility>

namespace {

struct Name {
    const char* base;
    int version;        // CUDA version whose ABI the client was written for
    const char* plain;  // exported name, legacy default stream
    const char* ptds;   // exported name, per-thread default stream (or plain)
};

template <typename F>
void set(F* slot, void* p)
{
    *slot = reinterpret_cast<F>(p);
}

}  // namespace

std::string fill_api(Api* api, const std::string& route, bool per_thread)
{
    if (route == "direct")
        return fill_direct(api, per_thread) ? "" : "this client is not linked with -lcuda";

    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr)
        return std::string("dlopen libcuda.so.1: ") + dlerror();

    using Gpa = decltype(&cuGetProcAddress_v2);
    Gpa gpa = nullptr;
    if (route == "proc") {
        // Like cudart: find the resolver, then ask it for itself.
        gpa = reinterpret_cast<Gpa>(dlsym(lib, "cuGetProcAddress_v2"));
        if (gpa == nullptr)
            return "no cuGetProcAddress_v2";
        void* self = nullptr;
        CUdriverProcAddressQueryResult status;
        if (gpa("cuGetProcAddress", &self, 12000, 0, &status) != CUDA_SUCCESS || self == nullptr)
            return "cuGetProcAddress(\"cuGetProcAddress\") failed";
        gpa = reinterpret_cast<Gpa>(self);
    } else if (route != "dlsym") {
        return "unknown route " + route;
    }

    std::string missing;
    auto get = [&](const Name& n) -> void* {
        void* p = nullptr;
        if (gpa != nullptr) {
            CUdriverProcAddressQueryResult status;
            const cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                                : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
            // Like cudart: per-thread variants exist since CUDA 7.0.
            const int version = per_thread && n.version < 7000 ? 7000 : n.version;
            if (gpa(n.base, &p, version, flags, &status) != CUDA_SUCCESS)
                p = nullptr;
        } else {
            p = dlsym(lib, per_thread ? n.ptds : n.plain);
        }
        if (p == nullptr)
            missing += std::string(" ") + n.base;
        return p;
    };
    set(&api->init, get({"cuInit", 2000, "cuInit", "cuInit"}));
    set(&api->device_get, get({"cuDeviceGet", 2000, "cuDeviceGet", "cuDeviceGet"}));
    set(&api->primary_retain, get({"cuDevicePrimaryCtxRetain", 7000, "cuDevicePrimaryCtxRetain",
                                   "cuDevicePrimaryCtxRetain"}));
    set(&api->primary_release,
        get({"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2",
             "cuDevicePrimaryCtxRelease_v2"}));
    set(&api->ctx_set_current,
        get({"cuCtxSetCurrent", 4000, "cuCtxSetCurrent", "cuCtxSetCurrent"}));
    set(&api->ctx_synchronize,
        get({"cuCtxSynchronize", 2000, "cuCtxSynchronize", "cuCtxSynchronize"}));
    set(&api->stream_create, get({"cuStreamCreate", 2000, "cuStreamCreate", "cuStreamCreate"}));
    set(&api->stream_synchronize,
        get({"cuStreamSynchronize", 2000, "cuStreamSynchronize", "cuStreamSynchronize_ptsz"}));
    set(&api->stream_destroy,
        get({"cuStreamDestroy", 4000, "cuStreamDestroy_v2", "cuStreamDestroy_v2"}));
    set(&api->event_create, get({"cuEventCreate", 2000, "cuEventCreate", "cuEventCreate"}));
    set(&api->event_record, get({"cuEventRecord", 2000, "cuEventRecord", "cuEventRecord"}));
    set(&api->stream_wait_event,
        get({"cuStreamWaitEvent", 3020, "cuStreamWaitEvent", "cuStreamWaitEvent"}));
    set(&api->mem_alloc, get({"cuMemAlloc", 3020, "cuMemAlloc_v2", "cuMemAlloc_v2"}));
    set(&api->mem_free, get({"cuMemFree", 3020, "cuMemFree_v2", "cuMemFree_v2"}));
    set(&api->mem_alloc_managed,
        get({"cuMemAllocManaged", 6000, "cuMemAllocManaged", "cuMemAllocManaged"}));
    set(&api->mem_get_info, get({"cuMemGetInfo", 3020, "cuMemGetInfo_v2", "cuMemGetInfo_v2"}));
    set(&api->device_total_mem,
        get({"cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2", "cuDeviceTotalMem_v2"}));
    set(&api->func_get_attribute,
        get({"cuFuncGetAttribute", 2020, "cuFuncGetAttribute", "cuFuncGetAttribute"}));
    set(&api->launch_kernel,
        get({"cuLaunchKernel", 4000, "cuLaunchKernel", "cuLaunchKernel_ptsz"}));
    set(&api->launch_kernel_ex,
        get({"cuLaunchKernelEx", 11060, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"}));
    set(&api->launch_old, get({"cuLaunch", 2000, "cuLaunch", "cuLaunch"}));
    set(&api->launch_grid, get({"cuLaunchGrid", 2000, "cuLaunchGrid", "cuLaunchGrid"}));
    set(&api->launch_grid_async,
        get({"cuLaunchGridAsync", 2000, "cuLaunchGridAsync", "cuLaunchGridAsync"}));
    set(&api->launch_multi_device,
        get({"cuLaunchCooperativeKernelMultiDevice", 9000, "cuLaunchCooperativeKernelMultiDevice",
             "cuLaunchCooperativeKernelMultiDevice"}));
    set(&api->memcpy_htod, get({"cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"}));
    set(&api->memcpy_dtoh, get({"cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"}));
    set(&api->memset_d8, get({"cuMemsetD8", 3020, "cuMemsetD8_v2", "cuMemsetD8_v2_ptds"}));
    set(&api->memcpy_htod_async,
        get({"cuMemcpyHtoDAsync", 3020, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"}));
    set(&api->memset_d8_async,
        get({"cuMemsetD8Async", 3020, "cuMemsetD8Async", "cuMemsetD8Async_ptsz"}));
    set(&api->begin_capture, get({"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2",
                                  "cuStreamBeginCapture_v2_ptsz"}));
    set(&api->end_capture,
        get({"cuStreamEndCapture", 10000, "cuStreamEndCapture", "cuStreamEndCapture_ptsz"}));
    set(&api->graph_instantiate, get({"cuGraphInstantiate", 11040, "cuGraphInstantiateWithFlags",
                                      "cuGraphInstantiateWithFlags"}));
    set(&api->graph_launch, get({"cuGraphLaunch", 10000, "cuGraphLaunch", "cuGraphLaunch_ptsz"}));
    set(&api->graph_exec_destroy,
        get({"cuGraphExecDestroy", 10000, "cuGraphExecDestroy", "cuGraphExecDestroy"}));
    set(&api->graph_destroy, get({"cuGraphDestroy", 10000, "cuGraphDestroy", "cuGraphDestroy"}));
    set(&api->graph_create, get({"cuGraphCreate", 10000, "cuGraphCreate", "cuGraphCreate"}));
    set(&api->graph_add_mem_alloc_node,
        get({"cuGraphAddMemAllocNode", 11040, "cuGraphAddMemAllocNode", "cuGraphAddMemAllocNode"}));
    set(&api->graph_add_memset_node,
        get({"cuGraphAddMemsetNode", 10000, "cuGraphAddMemsetNode", "cuGraphAddMemsetNode"}));
    set(&api->mem_alloc_async,
        get({"cuMemAllocAsync", 11020, "cuMemAllocAsync", "cuMemAllocAsync_ptsz"}));
    set(&api->mem_free_async,
        get({"cuMemFreeAsync", 11020, "cuMemFreeAsync", "cuMemFreeAsync_ptsz"}));
    set(&api->mem_create, get({"cuMemCreate", 10020, "cuMemCreate", "cuMemCreate"}));
    set(&api->mem_release, get({"cuMemRelease", 10020, "cuMemRelease", "cuMemRelease"}));
    for (auto [slot, n] : std::initializer_list<std::pair<void**, Name>>{
             {reinterpret_cast<void**>(&api->mem_address_reserve),
              {"cuMemAddressReserve", 10020, "cuMemAddressReserve", "cuMemAddressReserve"}},
             {reinterpret_cast<void**>(&api->mem_address_free),
              {"cuMemAddressFree", 10020, "cuMemAddressFree", "cuMemAddressFree"}},
             {reinterpret_cast<void**>(&api->mem_map), {"cuMemMap", 10020, "cuMemMap", "cuMemMap"}},
             {reinterpret_cast<void**>(&api->mem_unmap),
              {"cuMemUnmap", 10020, "cuMemUnmap", "cuMemUnmap"}},
             {reinterpret_cast<void**>(&api->mem_retain),
              {"cuMemRetainAllocationHandle", 11000, "cuMemRetainAllocationHandle",
               "cuMemRetainAllocationHandle"}},
             {reinterpret_cast<void**>(&api->array_create),
              {"cuArrayCreate", 3020, "cuArrayCreate_v2", "cuArrayCreate_v2"}},
             {reinterpret_cast<void**>(&api->array3d_create),
              {"cuArray3DCreate", 3020, "cuArray3DCreate_v2", "cuArray3DCreate_v2"}},
             {reinterpret_cast<void**>(&api->array_destroy),
              {"cuArrayDestroy", 2000, "cuArrayDestroy", "cuArrayDestroy"}},
             {reinterpret_cast<void**>(&api->mipmapped_create),
              {"cuMipmappedArrayCreate", 5000, "cuMipmappedArrayCreate", "cuMipmappedArrayCreate"}},
             {reinterpret_cast<void**>(&api->mipmapped_destroy),
              {"cuMipmappedArrayDestroy", 5000, "cuMipmappedArrayDestroy",
               "cuMipmappedArrayDestroy"}}})
        *slot = get(n);
    set(&api->ipc_get_mem_handle,
        get({"cuIpcGetMemHandle", 4010, "cuIpcGetMemHandle", "cuIpcGetMemHandle"}));
    set(&api->mem_get_handle_for_range,
        get({"cuMemGetHandleForAddressRange", 11070, "cuMemGetHandleForAddressRange",
             "cuMemGetHandleForAddressRange"}));
    set(&api->pointer_get_attribute,
        get({"cuPointerGetAttribute", 4000, "cuPointerGetAttribute", "cuPointerGetAttribute"}));
    set(&api->pointer_get_attributes,
        get({"cuPointerGetAttributes", 7000, "cuPointerGetAttributes", "cuPointerGetAttributes"}));
    set(&api->prefetch_v2,
        get({"cuMemPrefetchAsync", 12020, "cuMemPrefetchAsync_v2", "cuMemPrefetchAsync_v2_ptsz"}));
    set(&api->prefetch_v1,
        get({"cuMemPrefetchAsync", 8000, "cuMemPrefetchAsync", "cuMemPrefetchAsync_ptsz"}));
    set(&api->ctx_enable_peer,
        get({"cuCtxEnablePeerAccess", 4000, "cuCtxEnablePeerAccess", "cuCtxEnablePeerAccess"}));
    set(&api->ctx_disable_peer,
        get({"cuCtxDisablePeerAccess", 4000, "cuCtxDisablePeerAccess", "cuCtxDisablePeerAccess"}));
    set(&api->stream_wait_value32,
        get({"cuStreamWaitValue32", 11070, "cuStreamWaitValue32_v2", "cuStreamWaitValue32_v2"}));
    set(&api->stream_write_value32,
        get({"cuStreamWriteValue32", 11070, "cuStreamWriteValue32_v2", "cuStreamWriteValue32_v2"}));
    return missing.empty() ? "" : "not found:" + missing;
}
