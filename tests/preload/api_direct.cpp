// Route (a): the driver's exported symbols, bound by the dynamic linker
// (programs linked with -lcuda, Triton's launchers).
#include "api.h"

void fill_direct_ptds(Api* api);

bool fill_direct(Api* api, bool per_thread)
{
    api->init = &cuInit;
    api->device_get = &cuDeviceGet;
    api->primary_retain = &cuDevicePrimaryCtxRetain;
    api->ctx_set_current = &cuCtxSetCurrent;
    api->ctx_synchronize = &cuCtxSynchronize;
    api->stream_create = &cuStreamCreate;
    api->mem_alloc = &cuMemAlloc;  // cuda.h: cuMemAlloc_v2
    api->mem_free = &cuMemFree;
    api->mem_alloc_managed = &cuMemAllocManaged;
    api->mem_get_info = &cuMemGetInfo;
    api->device_total_mem = &cuDeviceTotalMem;
    api->memcpy_dtoh = &cuMemcpyDtoH;
    api->graph_instantiate = &cuGraphInstantiate;
    api->graph_exec_destroy = &cuGraphExecDestroy;
    api->graph_destroy = &cuGraphDestroy;
    api->mem_create = &cuMemCreate;
    api->mem_release = &cuMemRelease;
    api->ipc_get_mem_handle = &cuIpcGetMemHandle;
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
    api->begin_capture = &cuStreamBeginCapture;
    api->end_capture = &cuStreamEndCapture;
    api->graph_launch = &cuGraphLaunch;
    api->mem_alloc_async = &cuMemAllocAsync;
    api->mem_free_async = &cuMemFreeAsync;
    api->prefetch_v2 = &cuMemPrefetchAsync;
    return true;
}
