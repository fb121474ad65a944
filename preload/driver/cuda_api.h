// cuda.h as the driver itself sees it: with __CUDA_API_VERSION_INTERNAL every
// exported variant (cuMemAlloc_v2, cuLaunchKernel_ptsz, ...) is declared under
// its real name and none is renamed by a macro, so each wrapper we define is
// checked against the driver's own prototype.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
