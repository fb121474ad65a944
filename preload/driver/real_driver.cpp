#include "preload/driver/real_driver.h"

#include <dlfcn.h>

#include <atomic>

#include "preload/driver/base_glibc.h"
#include "preload/driver/glibc_version.h"

namespace nvshare::preload {

namespace {

// Builtins, not std::atomic: real_dlsym() is uninstrumented, and the
// std::atomic members are functions that a sanitizer build instruments.
DlsymFn g_dlsym = nullptr;
std::atomic<void*> g_driver{nullptr};

// dlopen runs libcuda's constructors, which may look up cu* names; a nested
// lookup on this thread must not open the library a second time.
thread_local bool t_opening = false;

}  // namespace

NVS_UNINSTRUMENTED DlsymFn real_dlsym()
{
    DlsymFn f = __atomic_load_n(&g_dlsym, __ATOMIC_ACQUIRE);
    if (f != nullptr)
        return f;
    void* p = base_glibc::dlvsym(RTLD_NEXT, "dlsym", NVS_GLIBC_DLSYM);
    if (p == nullptr)
        p = base_glibc::dlvsym(RTLD_NEXT, "dlsym", NVS_GLIBC_BASE);
    f = reinterpret_cast<DlsymFn>(p);
    __atomic_store_n(&g_dlsym, f, __ATOMIC_RELEASE);
    return f;
}

void* loaded_driver()
{
    void* h = g_driver.load(std::memory_order_acquire);
    if (h != nullptr)
        return h;
    h = base_glibc::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h != nullptr) {
        void* expected = nullptr;
        if (!g_driver.compare_exchange_strong(expected, h))
            base_glibc::dlclose(h);  // another thread won; drop our extra reference
        h = g_driver.load(std::memory_order_acquire);
    }
    return h;
}

void* driver_symbol(const char* name)
{
    void* h = loaded_driver();
    if (h == nullptr) {
        if (t_opening)
            return nullptr;
        t_opening = true;
        h = base_glibc::dlopen("libcuda.so.1", RTLD_NOW);
        t_opening = false;
        if (h == nullptr)
            return nullptr;
        void* expected = nullptr;
        if (!g_driver.compare_exchange_strong(expected, h))
            base_glibc::dlclose(h);
        h = g_driver.load(std::memory_order_acquire);
    }
    DlsymFn f = real_dlsym();
    return f != nullptr ? f(h, name) : nullptr;
}

}  // namespace nvshare::preload
