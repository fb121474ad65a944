// glibc's functions that moved between libraries, bound at the architecture's
// base symbol version (GLIBC_2.2.5 on x86_64, GLIBC_2.17 on aarch64), so that
// libnvshare.so asks no newer glibc than that of the oldest images users run:
// a preloaded library whose symbol version is missing stops every program,
// /bin/sh included. Before glibc 2.34, dlopen, dlclose and dlvsym lived in
// libdl.so.2 and pthread_create and pthread_join in libpthread.so.0;
// libnvshare.so does not list those (it would load two more libraries into
// every process on a new glibc). The references are weak: where the process
// has not put those libraries in the global scope, the function is looked up
// among everything loaded (loaded_symbol.h); where nothing loaded defines it,
// the call fails (nullptr, ENOSYS) and the caller goes on without it.
#pragma once

#include <pthread.h>

#include "preload/driver/real_driver.h"  // NVS_UNINSTRUMENTED

namespace nvshare::preload::base_glibc {

void* dlopen(const char* file, int mode);
int dlclose(void* handle);
NVS_UNINSTRUMENTED void* dlvsym(void* handle, const char* name, const char* version);
int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg);
int pthread_join(pthread_t thread, void** result);

// A thread of the library's own (the client thread):
// detached, and started with every signal blocked, so that it never takes
// the application's signals. Returns pthread_create's error (0: started).
int start_detached(void* (*start)(void*), void* arg);

}  // namespace nvshare::preload::base_glibc
