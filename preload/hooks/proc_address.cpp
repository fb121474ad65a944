#include "preload/hooks/proc_address.h"

#include <atomic>
#include <cstring>

#include "preload/driver/hook_table.h"
#include "preload/driver/real_driver.h"
#include "preload/env.h"
#include "preload/log.h"

namespace nvshare::preload {

namespace {

// Exported names only (internal entries are never handed out).
const char* const* exported_names()
{
    static const char* names[kHookCount];
    static std::atomic<bool> ready{false};
    if (!ready.load(std::memory_order_acquire)) {
        for (size_t i = 0; i < kHookCount; ++i)
            names[i] = hook_wrapper(i) != nullptr ? hook_name(i) : nullptr;
        ready.store(true, std::memory_order_release);
    }
    return names;
}

const void* lookup_real(size_t index, void*)
{
    return real_ptr(static_cast<HookId>(index));
}

std::atomic<bool> g_warned_unknown{false};

void* wrap_resolved(const char* symbol, void* pointer)
{
    for (size_t i = 0; i < kHookCount; ++i)
        if (hook_wrapper(i) == pointer)
            return pointer;  // already ours (asked through a wrapper we returned)
    bool any = false;
    const int i =
        match_variant(symbol, pointer, exported_names(), kHookCount, lookup_real, nullptr, &any);
    if (i >= 0)
        return hook_wrapper(static_cast<size_t>(i));
    if (any) {
        // A variant we do not wrap (legacy 32-bit ABI) is a plain export of
        // the driver; anything else is a tool's trampoline we cannot bind.
        void* driver = loaded_driver();
        DlsymFn dl = real_dlsym();
        const bool legacy = driver != nullptr && dl != nullptr && dl(driver, symbol) == pointer;
        if (!legacy && !g_warned_unknown.exchange(true))
            log_warn(
                "cuGetProcAddress(\"%s\") returned a function that is not a driver export "
                "(a profiler?); work submitted through such functions is not scheduled",
                symbol);
    }
    return pointer;
}

}  // namespace

}  // namespace nvshare::preload

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
    CUdriverProcAddressQueryResult* symbolStatus)
{
    auto real = NVS_REAL(cuGetProcAddress_v2);
    if (real == nullptr)
        return CUDA_ERROR_NOT_SUPPORTED;
    const CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr && *pfn != nullptr &&
        !nvshare::preload::config().disabled)
        *pfn = nvshare::preload::wrap_resolved(symbol, *pfn);
    return r;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol, void** pfn,
                                                                 int cudaVersion, cuuint64_t flags)
{
    auto real = NVS_REAL(cuGetProcAddress);
    if (real == nullptr)
        return CUDA_ERROR_NOT_SUPPORTED;
    const CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr && *pfn != nullptr &&
        !nvshare::preload::config().disabled)
        *pfn = nvshare::preload::wrap_resolved(symbol, *pfn);
    return r;
}

}  // extern "C"
