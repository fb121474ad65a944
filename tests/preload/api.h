// The driver entry points the test client uses, filled through one of the
// routes real programs take: direct symbols (linked with -lcuda),
// dlopen + dlsym, or cuGetProcAddress_v2.
#pragma once

// The deprecated launches are part of what is tested.
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>

#include <string>

struct Api {
    decltype(&cuInit) init = nullptr;
    decltype(&cuDeviceGet) device_get = nullptr;
    decltype(&cuDevicePrimaryCtxRetain) primary_retain = nullptr;
    decltype(&cuDevicePrimaryCtxRelease) primary_release = nullptr;
    decltype(&cuCtxSetCurrent) ctx_set_current = nullptr;
    decltype(&cuCtxSynchronize) ctx_synchronize = nullptr;
    decltype(&cuCtxEnablePeerAccess) ctx_enable_peer = nullptr;
    decltype(&cuCtxDisablePeerAccess) ctx_disable_peer = nullptr;
    decltype(&cuStreamCreate) stream_create = nullptr;
    decltype(&cuStreamSynchronize) stream_synchronize = nullptr;
    decltype(&cuStreamDestroy) stream_destroy = nullptr;
    decltype(&cuEventCreate) event_create = nullptr;
    decltype(&cuEventRecord) event_record = nullptr;
    decltype(&cuStreamWaitEvent) stream_wait_event = nullptr;
    decltype(&cuMemAlloc_v2) mem_alloc = nullptr;
    decltype(&cuMemFree_v2) mem_free = nullptr;
    decltype(&cuMemAllocManaged) mem_alloc_managed = nullptr;
    decltype(&cuMemGetInfo_v2) mem_get_info = nullptr;
    decltype(&cuDeviceTotalMem_v2) device_total_mem = nullptr;
    decltype(&cuFuncGetAttribute) func_get_attribute = nullptr;
    decltype(&cuLaunchKernel) launch_kernel = nullptr;
    decltype(&cuLaunchKernelEx) launch_kernel_ex = nullptr;
    decltype(&cuLaunch) launch_old = nullptr;
    decltype(&cuLaunchGrid) launch_grid = nullptr;
    decltype(&cuLaunchGridAsync) launch_grid_async = nullptr;
    decltype(&cuLaunchCooperativeKernelMultiDevice) launch_multi_device = nullptr;
    decltype(&cuMemcpyHtoD) memcpy_htod = nullptr;
    decltype(&cuMemcpyDtoH) memcpy_dtoh = nullptr;
    decltype(&cuMemsetD8) memset_d8 = nullptr;
    decltype(&cuMemcpyHtoDAsync) memcpy_htod_async = nullptr;
    decltype(&cuMemsetD8Async) memset_d8_async = nullptr;
    decltype(&cuStreamBeginCapture) begin_capture = nullptr;
    decltype(&cuStreamEndCapture) end_capture = nullptr;
    decltype(&cuGraphInstantiateWithFlags) graph_instantiate = nullptr;
    decltype(&cuGraphLaunch) graph_launch = nullptr;
    decltype(&cuGraphExecDestroy) graph_exec_destroy = nullptr;
    decltype(&cuGraphDestroy) graph_destroy = nullptr;
    decltype(&cuGraphCreate) graph_create = nullptr;
    decltype(&cuGraphAddMemAllocNode) graph_add_mem_alloc_node = nullptr;
    decltype(&cuGraphAddMemsetNode) graph_add_memset_node = nullptr;
    decltype(&cuMemAllocAsync) mem_alloc_async = nullptr;
    decltype(&cuMemFreeAsync) mem_free_async = nullptr;
    decltype(&cuMemCreate) mem_create = nullptr;
    decltype(&cuMemRelease) mem_release = nullptr;
    decltype(&cuMemAddressReserve) mem_address_reserve = nullptr;
    decltype(&cuMemAddressFree) mem_address_free = nullptr;
    decltype(&cuMemMap) mem_map = nullptr;
    decltype(&cuMemUnmap) mem_unmap = nullptr;
    decltype(&cuMemRetainAllocationHandle) mem_retain = nullptr;
    decltype(&cuArrayCreate) array_create = nullptr;
    decltype(&cuArray3DCreate) array3d_create = nullptr;
    decltype(&cuArrayDestroy) array_destroy = nullptr;
    decltype(&cuMipmappedArrayCreate) mipmapped_create = nullptr;
    decltype(&cuMipmappedArrayDestroy) mipmapped_destroy = nullptr;
    decltype(&cuIpcGetMemHandle) ipc_get_mem_handle = nullptr;
    decltype(&cuMemGetHandleForAddressRange) mem_get_handle_for_range = nullptr;
    decltype(&cuPointerGetAttribute) pointer_get_attribute = nullptr;
    decltype(&cuPointerGetAttributes) pointer_get_attributes = nullptr;
    decltype(&cuMemPrefetchAsync) prefetch_v2 = nullptr;
    decltype(&cuStreamWaitValue32) stream_wait_value32 = nullptr;
    decltype(&cuStreamWriteValue32) stream_write_value32 = nullptr;
    // The CUDA 8.0 ABI of cuMemPrefetchAsync (device ordinal, no flags).
    CUresult (*prefetch_v1)(CUdeviceptr, size_t, CUdevice, CUstream) = nullptr;
};

// Fill `api` through `route` ("direct", "dlsym", "proc"); per_thread selects
// the per-thread-default-stream variants. Returns an error text or "".
std::string fill_api(Api* api, const std::string& route, bool per_thread);

// Implemented only in the binary linked with -lcuda.
bool fill_direct(Api* api, bool per_thread);
