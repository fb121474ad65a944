// What dlsym answers under libnvshare.so: wrappers for driver names it wraps
// (whatever the handle), the driver's own function otherwise, nothing for
// names that do not exist, and glibc's answer, RTLD_NEXT semantics included,
// for everything else.
#include <dlfcn.h>

#include <cstdio>
#include <string>

namespace {

const char* origin(void* p)
{
    if (p == nullptr)
        return "null";
    Dl_info info{};
    if (dladdr(p, &info) == 0 || info.dli_fname == nullptr)
        return "unknown";
    const std::string f = info.dli_fname;
    if (f.find("libnvshare") != std::string::npos)
        return "libnvshare";
    if (f.find("libcuda") != std::string::npos)
        return "libcuda";
    return "other";
}

}  // namespace

extern "C" int probe_fn();

int main()
{
    // Route through the library that links probe_fn, so it is loaded.
    volatile int keep = probe_fn();
    (void)keep;
    auto next = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "next_probe"));
    printf("rtld_next=%d\n", next != nullptr ? next() : -1);
    // Probing for the driver before it is loaded finds nothing.
    printf("default_before_load=%s\n", origin(dlsym(RTLD_DEFAULT, "cuLaunchKernel")));
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
    printf("wrapped=%s\n", origin(dlsym(cuda, "cuLaunchKernel")));
    printf("wrapped_ptsz=%s\n", origin(dlsym(cuda, "cuLaunchKernel_ptsz")));
    printf("default_after_load=%s\n", origin(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")));
    printf("unwrapped=%s\n", origin(dlsym(cuda, "cuDeviceGet")));
    // Wrapped by the library but not exported by this (fake) driver.
    printf("absent_in_driver=%s\n", origin(dlsym(cuda, "cuMemcpy3DPeer")));
    printf("missing=%s\n", origin(dlsym(cuda, "cuNoSuchFunction")));
    return 0;
}
