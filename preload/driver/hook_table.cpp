#include "preload/driver/hook_table.h"

#include <array>
#include <cstdint>
#include <cstring>

#include "preload/driver/real_driver.h"

namespace nvshare::preload {

namespace {

// All names, NUL-separated, in HookId order; offsets computed at compile time.
constexpr char kNames[] =
#define NVS_GATED(name, ...) #name "\0"
#define NVS_PENDING(name, ...) #name "\0"
#define NVS_CUSTOM(name) #name "\0"
#define NVS_INTERNAL(name) #name "\0"
#include "preload/driver/hooks.def"
#undef NVS_GATED
#undef NVS_PENDING
#undef NVS_CUSTOM
#undef NVS_INTERNAL
    ;

constexpr std::array<uint16_t, kHookCount> kNameOffsets = [] {
    std::array<uint16_t, kHookCount> offsets{};
    size_t pos = 0;
    for (size_t i = 0; i < kHookCount; ++i) {
        offsets[i] = static_cast<uint16_t>(pos);
        while (kNames[pos] != '\0')
            ++pos;
        ++pos;
    }
    return offsets;
}();
static_assert(sizeof kNames < 65536);

}  // namespace

const char* hook_name(size_t i)
{
    return kNames + kNameOffsets[i];
}

// A switch compiles to PC-relative addresses: no relocation at load time,
// unlike a table of pointers.
void* hook_wrapper(size_t i)
{
    switch (static_cast<HookId>(i)) {
#define NVS_GATED(name, ...) \
    case HookId::name:       \
        return reinterpret_cast<void*>(&::name);
#define NVS_PENDING(name, ...) \
    case HookId::name:         \
        return reinterpret_cast<void*>(&::name);
#define NVS_CUSTOM(name) \
    case HookId::name:   \
        return reinterpret_cast<void*>(&::name);
#define NVS_INTERNAL(name) \
    case HookId::name:     \
        return nullptr;
#include "preload/driver/hooks.def"
#undef NVS_GATED
#undef NVS_PENDING
#undef NVS_CUSTOM
#undef NVS_INTERNAL
        case HookId::Count:
            break;
    }
    return nullptr;
}

std::atomic<void*> g_real[kHookCount];

int find_exported_hook(const char* name)
{
    // Called for every dlsym("cu...") and cuGetProcAddress: a few hundred
    // times at start-up, so a linear scan is cheaper than building an index.
    for (size_t i = 0; i < kHookCount; ++i)
        if (strcmp(hook_name(i), name) == 0 && hook_wrapper(i) != nullptr)
            return static_cast<int>(i);
    return -1;
}

void* real_slow(HookId id)
{
    const size_t i = static_cast<size_t>(id);
    void* p = driver_symbol(hook_name(i));
    if (p != nullptr)
        g_real[i].store(p, std::memory_order_release);
    return p;
}

}  // namespace nvshare::preload
