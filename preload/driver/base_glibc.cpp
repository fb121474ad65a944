#include "preload/driver/base_glibc.h"

#include <errno.h>
#include <signal.h>

#include "preload/driver/glibc_version.h"
#include "preload/driver/loaded_symbol.h"

// Weak references renamed to NAME@base-version by .symver: glibc 2.34 and
// later keep these versions as compatibility symbols of libc.so.6, older
// glibc defines them in libdl.so.2 and libpthread.so.0.
extern "C" {
__attribute__((weak)) void* nvs_base_dlopen(const char*, int);
__attribute__((weak)) int nvs_base_dlclose(void*);
__attribute__((weak)) void* nvs_base_dlvsym(void*, const char*, const char*);
__attribute__((weak)) int nvs_base_pthread_create(pthread_t*, const pthread_attr_t*,
                                                  void* (*)(void*), void*);
__attribute__((weak)) int nvs_base_pthread_join(pthread_t, void**);
}
__asm__(".symver nvs_base_dlopen, dlopen@" NVS_GLIBC_BASE);
__asm__(".symver nvs_base_dlclose, dlclose@" NVS_GLIBC_BASE);
__asm__(".symver nvs_base_dlvsym, dlvsym@" NVS_GLIBC_BASE);
__asm__(".symver nvs_base_pthread_create, pthread_create@" NVS_GLIBC_BASE);
__asm__(".symver nvs_base_pthread_join, pthread_join@" NVS_GLIBC_BASE);

namespace nvshare::preload::base_glibc {

namespace {

// The bound reference, else the first loaded definition (cached: a library
// once loaded stays). Builtin atomics: dlvsym is reached from real_dlsym(),
// which must stay uninstrumented.
template <typename F>
NVS_UNINSTRUMENTED F resolve(F bound, F* cache, const char* name)
{
    if (bound != nullptr)
        return bound;
    F f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (f == nullptr) {
        f = reinterpret_cast<F>(loaded_symbol(name, NVS_GLIBC_BASE));
        if (f != nullptr)
            __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    }
    return f;
}

decltype(&nvs_base_dlopen) g_dlopen = nullptr;
decltype(&nvs_base_dlclose) g_dlclose = nullptr;
decltype(&nvs_base_dlvsym) g_dlvsym = nullptr;
decltype(&nvs_base_pthread_create) g_pthread_create = nullptr;
decltype(&nvs_base_pthread_join) g_pthread_join = nullptr;

}  // namespace

void* dlopen(const char* file, int mode)
{
    const auto f = resolve(&nvs_base_dlopen, &g_dlopen, "dlopen");
    return f != nullptr ? f(file, mode) : nullptr;
}

int dlclose(void* handle)
{
    const auto f = resolve(&nvs_base_dlclose, &g_dlclose, "dlclose");
    return f != nullptr ? f(handle) : -1;
}

NVS_UNINSTRUMENTED void* dlvsym(void* handle, const char* name, const char* version)
{
    const auto f = resolve(&nvs_base_dlvsym, &g_dlvsym, "dlvsym");
    return f != nullptr ? f(handle, name, version) : nullptr;
}

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg)
{
    const auto f = resolve(&nvs_base_pthread_create, &g_pthread_create, "pthread_create");
    return f != nullptr ? f(thread, attr, start, arg) : ENOSYS;
}

int pthread_join(pthread_t thread, void** result)
{
    const auto f = resolve(&nvs_base_pthread_join, &g_pthread_join, "pthread_join");
    return f != nullptr ? f(thread, result) : ENOSYS;
}

int start_detached(void* (*start)(void*), void* arg)
{
    sigset_t all, old;
    sigfillset(&all);
    // sigprocmask: the calling thread's mask, as pthread_sigmask sets it, at
    // the base glibc version; the new thread inherits it.
    sigprocmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    const int r = base_glibc::pthread_create(&thread, &attr, start, arg);
    pthread_attr_destroy(&attr);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    return r;
}

}  // namespace nvshare::preload::base_glibc
