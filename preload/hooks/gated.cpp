// The gated wrappers: wait for the GPU lock, then call the real function.
// Generated from hooks.def; each definition is checked against cuda.h.
#include "preload/driver/hook_table.h"
#include "preload/lock/lock.h"

#define NVS_CUSTOM(name)
#define NVS_INTERNAL(name)
#define NVS_GATED(name, stream, per_thread, params, args)                  \
    extern "C" __attribute__((visibility("default"))) CUresult name params \
    {                                                                      \
        auto real = NVS_REAL(name);                                        \
        if (real == nullptr)                                               \
            return CUDA_ERROR_NOT_FOUND;                                   \
        ::nvshare::preload::lock::enter(stream, per_thread);               \
        const CUresult r = real args;                                      \
        ::nvshare::preload::lock::leave();                                 \
        return r;                                                          \
    }
#include "preload/driver/hooks.def"
