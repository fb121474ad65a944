// Route (a) for programs built with per-thread default streams: cuda.h maps
// the same names onto the _ptsz/_ptds exports.
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "api.h"

void fill_direct_ptds(Api* api);

void fill_direct_ptds(Api* api)
{
    api->stream_synchronize = &cuStreamSynchronize;  // _ptsz
    api->launch_kernel = &cuLaunchKernel;            // _ptsz
    api->launch_kernel_ex = &cuLaunchKernelEx;       // _ptsz
    api->memcpy_htod = &cuMemcpyHtoD;                // _v2_ptds
    api->memset_d8 = &cuMemsetD8;                    // _v2_ptds
    api->memcpy_htod_async = &cuMemcpyHtoDAsync;     // _v2_ptsz
    api->begin_capture = &cuStreamBeginCapture;      // _v2_ptsz
    api->end_capture = &cuStreamEndCapture;          // _ptsz
    api->graph_launch = &cuGraphLaunch;              // _ptsz
    api->mem_alloc_async = &cuMemAllocAsync;         // _ptsz
    api->mem_free_async = &cuMemFreeAsync;           // _ptsz
    api->prefetch_v2 = &cuMemPrefetchAsync;          // _v2_ptsz
    api->memset_d8_async = &cuMemsetD8Async;         // _ptsz
}
