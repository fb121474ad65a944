// Preloaded after libnvshare.so: asks for the *next* probe_fn. With correct
// RTLD_NEXT semantics that is next_probe_l's (2); if libnvshare's dlsym
// override lost the caller, glibc would search after libnvshare and find this
// library's own (3).
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) int probe_fn();
extern "C" __attribute__((visibility("default"))) int next_probe();

extern "C" int probe_fn()
{
    return 3;
}

extern "C" int next_probe()
{
    auto f = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "probe_fn"));
    return f != nullptr ? f() : -1;
}
