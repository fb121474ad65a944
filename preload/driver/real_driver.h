// Reaching the real libcuda.so.1 and the real dlsym without ever calling our
// own exported entry points (which would recurse).
#pragma once

// For the dlsym path only. Sanitizer runtimes (test builds) look their
// interceptors up with dlsym(RTLD_NEXT, ...) while they initialize, which
// reaches our dlsym before instrumented code may run; and instrumentation
// (TSan's function exit) would stop our forwarding being a tail call. A no-op
// in the normal build.
#define NVS_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread", "undefined")))

namespace nvshare::preload {

using DlsymFn = void* (*)(void*, const char*);

// glibc's dlsym, found with dlvsym so that our dlsym override is bypassed.
NVS_UNINSTRUMENTED DlsymFn real_dlsym();

// libcuda.so.1 if the process has loaded it (never loads it), else nullptr.
void* loaded_driver();

// The real driver function of that exact exported name, or nullptr. Opens
// libcuda.so.1 if nobody has yet (only reached from a CUDA call).
void* driver_symbol(const char* name);

}  // namespace nvshare::preload
