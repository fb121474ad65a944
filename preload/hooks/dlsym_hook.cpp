// The exported dlsym: dlsym(handle, "cu...") answers our wrapper for names we
// wrap, whatever the handle (XLA, Triton and old PyTorch look driver functions
// up in a dlopen'ed libcuda). Everything else goes to glibc's dlsym.
#include <dlfcn.h>

#include "preload/driver/glibc_version.h"
#include "preload/driver/hook_table.h"
#include "preload/driver/real_driver.h"
#include "preload/env.h"

namespace nvshare::preload {
namespace {

// Returned by value, not through a pointer to a local of nvs_dlsym: a local
// whose address is taken stops GCC making the forwarding a tail call under
// -fsanitize=address at -O0, whatever the function's attributes.
struct DriverAnswer {
    bool decided;  // false: forward to glibc
    void* found;
};

DriverAnswer answer_driver_name(void* handle, const char* name)
{
    const int i = find_exported_hook(name);
    if (i < 0)
        return {false, nullptr};
    DlsymFn dl = real_dlsym();
    if (dl == nullptr)
        return {false, nullptr};
    void* found = dl(handle, name);
    if (found == hook_wrapper(static_cast<size_t>(i))) {
        // The global scope found our own export (RTLD_DEFAULT): the name
        // exists only if the driver is loaded and has it, as without us.
        void* driver = loaded_driver();
        found = driver != nullptr ? dl(driver, name) : nullptr;
    }
    // NVSHARE_DISABLE: the driver's own function, as if we were not here.
    return {true,
            found == nullptr || config().disabled ? found : hook_wrapper(static_cast<size_t>(i))};
}

}  // namespace
}  // namespace nvshare::preload

extern "C" {

void* nvs_dlsym(void* handle, const char* name);

// Forwarding must be a tail call: glibc's dlsym takes its caller's return
// address to resolve RTLD_NEXT, and that must be our caller's, not ours.
// optimize("O2") keeps it a tail call in -O0 builds too, sanitizer builds
// included (checked by the Dlsym end-to-end test).
__attribute__((visibility("default"), optimize("O2", "omit-frame-pointer")))
NVS_UNINSTRUMENTED void*
nvs_dlsym(void* handle, const char* name)
{
    if (name != nullptr && name[0] == 'c' && name[1] == 'u') {
        const nvshare::preload::DriverAnswer answer =
            nvshare::preload::answer_driver_name(handle, name);
        if (answer.decided)
            return answer.found;
    }
    nvshare::preload::DlsymFn real = nvshare::preload::real_dlsym();
    return real != nullptr ? real(handle, name) : nullptr;
}

__attribute__((visibility("default"), alias("nvs_dlsym"))) void* nvs_dlsym_base(void* handle,
                                                                                const char* name);
}

__asm__(".symver nvs_dlsym, dlsym@@" NVS_GLIBC_DLSYM);
__asm__(".symver nvs_dlsym_base, dlsym@" NVS_GLIBC_BASE);
