// The glibc symbol versions dlsym carries: the architecture's base version
// (old binaries) and GLIBC_2.34 (binaries linked since libdl moved into libc).
#pragma once

#if defined(__x86_64__)
#define NVS_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define NVS_GLIBC_BASE "GLIBC_2.17"
#else
#error "libnvshare.so: add this architecture's base glibc symbol version"
#endif
#define NVS_GLIBC_DLSYM "GLIBC_2.34"
