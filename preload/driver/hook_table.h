// The one table of driver entry points: exported name -> our wrapper, plus a
// slot for the real function, resolved lazily from libcuda.so.1. The dlsym
// override, cuGetProcAddress and the library's own calls all go through it.
#pragma once

#include <atomic>
#include <cstddef>

#include "preload/driver/cuda_api.h"

namespace nvshare::preload {

enum class HookId : unsigned {
#define NVS_GATED(name, ...) name,
#define NVS_PENDING(name, ...) name,
#define NVS_CUSTOM(name) name,
#define NVS_INTERNAL(name) name,
#include "preload/driver/hooks.def"
#undef NVS_GATED
#undef NVS_PENDING
#undef NVS_CUSTOM
#undef NVS_INTERNAL
    Count
};

inline constexpr size_t kHookCount = static_cast<size_t>(HookId::Count);

// Name and wrapper of entry i. The table holds no pointers, so loading the
// library relocates nothing for it: every process on the host loads it.
const char* hook_name(size_t i);
void* hook_wrapper(size_t i);  // nullptr: not exported (the library only calls it)

// Index of an exported hook by exact name, or -1.
int find_exported_hook(const char* name);

// The real function, resolved on first use; nullptr if the driver lacks it.
void* real_slow(HookId id);
extern std::atomic<void*> g_real[kHookCount];

inline void* real_ptr(HookId id)
{
    void* p = g_real[static_cast<size_t>(id)].load(std::memory_order_acquire);
    return p != nullptr ? p : real_slow(id);
}

}  // namespace nvshare::preload

// Typed real function: NVS_REAL(cuCtxSynchronize)() calls the driver's.
#define NVS_REAL(name)                   \
    reinterpret_cast<decltype(&::name)>( \
        ::nvshare::preload::real_ptr(::nvshare::preload::HookId::name))

// A wrapper the library exports in place of the driver's function.
#define NVS_EXPORT extern "C" __attribute__((visibility("default")))

// Hand-written wrappers for an entry point and a twin with the same
// parameters, one body for both: impl(real, args...), where `real` is each
// one's own real function (nullptr if the driver lacks it). Expanded by the
// preprocessor into two exported functions that call impl directly.
//   NVS_VERSION_PAIR(name, version, ...): `name` and `name` + `version` (_v2).
//   NVS_PER_THREAD_PAIR(name, ...): `name` and `name`_ptsz; impl's second
//       argument, per_thread, is 0 and 1 (the latter's default stream is the
//       per-thread one).
#define NVS_UNPAREN(...) __VA_ARGS__
#define NVS_VERSION_PAIR(name, version, impl, params, args)     \
    NVS_EXPORT CUresult name params                             \
    {                                                           \
        return impl(NVS_REAL(name), NVS_UNPAREN args);          \
    }                                                           \
    NVS_EXPORT CUresult name##version params                    \
    {                                                           \
        return impl(NVS_REAL(name##version), NVS_UNPAREN args); \
    }
#define NVS_PER_THREAD_PAIR(name, impl, params, args)            \
    NVS_EXPORT CUresult name params                              \
    {                                                            \
        return impl(NVS_REAL(name), 0, NVS_UNPAREN args);        \
    }                                                            \
    NVS_EXPORT CUresult name##_ptsz params                       \
    {                                                            \
        return impl(NVS_REAL(name##_ptsz), 1, NVS_UNPAREN args); \
    }
