// The gated wrappers: wait for the GPU lock, then call the real function;
// and the pending ones: call it at once, counted as pending work.
// Generated from hooks.def; each definition is checked against cuda.h.
#include "preload/driver/hook_table.h"
#include "preload/lock/gate.h"
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
#define NVS_PENDING(name, params, args)                                    \
    extern "C" __attribute__((visibility("default"))) CUresult name params \
    {                                                                      \
        auto real = NVS_REAL(name);                                        \
        if (real == nullptr)                                               \
            return CUDA_ERROR_NOT_FOUND;                                   \
        const ::nvshare::preload::PendingWork pending(true);               \
        return real args;                                                  \
    }
#include "preload/driver/hooks.def"
