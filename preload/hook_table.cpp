#include "preload/hook_table.h"

#include <cstring>

#include "preload/real_driver.h"

namespace nvshare::preload {

const HookEntry g_hooks[kHookCount] = {
#define NVS_GATED(name, ...) {#name, reinterpret_cast<void*>(&::name)},
#define NVS_CUSTOM(name) {#name, reinterpret_cast<void*>(&::name)},
#define NVS_INTERNAL(name) {#name, nullptr},
#include "preload/hooks.def"
#undef NVS_GATED
#undef NVS_CUSTOM
#undef NVS_INTERNAL
};

std::atomic<void*> g_real[kHookCount];

int find_exported_hook(const char* name)
{
    // Called for every dlsym("cu...") and cuGetProcAddress: a few hundred
    // times at start-up, so a linear scan is cheaper than building an index.
    for (size_t i = 0; i < kHookCount; ++i)
        if (g_hooks[i].wrapper != nullptr && strcmp(g_hooks[i].name, name) == 0)
            return static_cast<int>(i);
    return -1;
}

void* real_slow(HookId id)
{
    const size_t i = static_cast<size_t>(id);
    void* p = driver_symbol(g_hooks[i].name);
    if (p != nullptr)
        g_real[i].store(p, std::memory_order_release);
    return p;
}

}  // namespace nvshare::preload
