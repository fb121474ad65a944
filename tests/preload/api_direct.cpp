// Route (a): the driver's exported symbols, bound by the dynamic linker
// (programs linked with -lcuda, Triton's launchers).
#include "api.h"

void fill_direct_ptds(Api* api);

bool fill_direct(Api* api, bool per_thread)
{
    api->init = &cuInit;
    api->device_get = &cuDeviceGet;
    api->primary_retain = &cuDevicePrimaryCtxRetain;
    api->primary_release = &cuDevicePrimaryCtxRelease;  // cuda.h: _v2
    api->ctx_set_current = &cuCtxSetCurrent;
    api->ctx_synchronize = &cuCtxSynchronize;
    api->stream_create = &cuStreamCreate;
    api->mem_alloc = &cuMemAlloc;  // cuda.h: cuMemAlloc_v2
    api->mem_free = &cuMemFree;
    api->mem_alloc_managed = &cuMemAllocManaged;
    api->mem_get_info = &cuMemGetInfo;
    api->device_total_mem = &cuDeviceTotalMem;
    api->func_get_attribute = &cuFuncGetAttribute;
    api->memcpy_dtoh = &cuMemcpyDtoH;
    api->graph_instantiate = &cuGraphInstantiate;
    api->graph_exec_destroy = &cuGraphExecDestroy;
    api->graph_destroy = &cuGraphDestroy;
    api->mem_create = &cuMemCreate;
    api->mem_release = &cuMemRelease;
    api->mem_address_reserve = &cuMemAddressReserve;
    api->mem_address_free = &cuMemAddressFree;
    api->mem_map = &cuMemMap;
    api->mem_unmap = &cuMemUnmap;
    api->mem_retain = &cuMemRetainAllocationHandle;
    api->array_create = &cuArrayCreate;
    api->array3d_create = &cuArray3DCreate;
    api->array_destroy = &cuArrayDestroy;
    api->mipmapped_create = &cuMipmappedArrayCreate;
    api->mipmapped_destroy = &cuMipmappedArrayDestroy;
    api->ipc_get_mem_handle = &cuIpcGetMemHandle;
    api->graph_create = &cuGraphCreate;
    api->graph_add_mem_alloc_node = &cuGraphAddMemAllocNode;
    api->graph_add_memset_node = &cuGraphAddMemsetNode;
    api->mem_get_handle_for_range = &cuMemGetHandleForAddressRange;
    api->pointer_get_attribute = &cuPointerGetAttribute;
    api->pointer_get_attributes = &cuPointerGetAttributes;
    // Only the legacy-stream flavours are used for these.
    api->launch_old = &cuLaunch;
    api->launch_grid = &cuLaunchGrid;
    api->launch_grid_async = &cuLaunchGridAsync;
    api->launch_multi_device = &cuLaunchCooperativeKernelMultiDevice;
    api->stream_destroy = &cuStreamDestroy_v2;
    api->event_create = &cuEventCreate;
    api->event_record = &cuEventRecord;
    api->stream_wait_event = &cuStreamWaitEvent;
    // Only the legacy-stream flavour is used (on explicit streams).
    api->stream_wait_value32 = &cuStreamWaitValue32_v2;
    api->ctx_enable_peer = &cuCtxEnablePeerAccess;
    api->ctx_disable_peer = &cuCtxDisablePeerAccess;
    api->stream_write_value32 = &cuStreamWriteValue32_v2;
    if (per_thread) {
        fill_direct_ptds(api);
        return true;
    }
    api->stream_synchronize = &cuStreamSynchronize;
    api->launch_kernel = &cuLaunchKernel;
    api->launch_kernel_ex = &cuLaunchKernelEx;
    api->memcpy_htod = &cuMemcpyHtoD;
    api->memset_d8 = &cuMemsetD8;
    api->memcpy_htod_async = &cuMemcpyHtoDAsync;
    api->memset_d8_async = &cuMemsetD8Async;
    api->begin_capture = &cuStreamBeginCapture;
    api->end_capture = &cuStreamEndCapture;
    api->graph_launch = &cuGraphLaunch;
    api->mem_alloc_async = &cuMemAllocAsync;
    api->mem_free_async = &cuMemFreeAsync;
    api->prefetch_v2 = &cuMemPrefetchAsync;
    return true;
}
