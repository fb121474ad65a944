// A stand-in libcuda.so.1 for the gpu suite's driver-error scenario: it
// defines cuMemCreate, cuMemMap and cuMemSetAccess, fails the next call of
// the one named by fail_driver_next(CALL, ERROR) once with ERROR, and passes
// every call to the real driver, which it needs as libnvshare-real-cuda.so.1
// (run_suite.py links that name to the host's libcuda.so.1 in a folder of
// its own): every other name resolves there. libnvshare.so looks the driver
// up by its handle on libcuda.so.1, so it reaches these three, as the fake
// driver's fakecuda_fail_next makes its own fail where no GPU is.
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static char g_call[32];
static CUresult g_error;

int fail_driver_next(const char* call, CUresult error)
{
    if (strlen(call) >= sizeof g_call)
        return 1;
    strcpy(g_call, call);
    __atomic_store_n(&g_error, error, __ATOMIC_RELEASE);
    return 0;
}

// glibc's own dlsym: libnvshare.so's dlsym answers its wrappers for cu*
// names, whatever the handle, and would send these calls back to it.
typedef void* (*Dlsym)(void*, const char*);
static Dlsym glibc_dlsym(void)
{
    void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void* f = libc != NULL ? dlvsym(libc, "dlsym", "GLIBC_2.34") : NULL;
    if (f == NULL && libc != NULL)
        f = dlvsym(libc, "dlsym", "GLIBC_2.2.5");
    return (Dlsym)f;
}

static void* real(const char* name)
{
    void* driver = dlopen("libnvshare-real-cuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    Dlsym find = glibc_dlsym();
    return driver != NULL && find != NULL ? find(driver, name) : NULL;
}

// ERROR if this call is the one asked to fail (once), else 0.
static CUresult injected(const char* call)
{
    if (__atomic_load_n(&g_error, __ATOMIC_ACQUIRE) == 0 || strcmp(call, g_call) != 0)
        return CUDA_SUCCESS;
    const CUresult e = __atomic_exchange_n(&g_error, 0, __ATOMIC_ACQ_REL);
    if (e != 0)
        fprintf(stderr, "fail_driver: %s failed with %d as asked\n", call, (int)e);
    return e;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags)
{
    const CUresult e = injected("cuMemCreate");
    if (e != CUDA_SUCCESS)
        return e;
    CUresult (*f)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                  unsigned long long) = real("cuMemCreate");
    return f != NULL ? f(handle, size, prop, flags) : CUDA_ERROR_NOT_FOUND;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    const CUresult e = injected("cuMemMap");
    if (e != CUDA_SUCCESS)
        return e;
    CUresult (*f)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) =
        real("cuMemMap");
    return f != NULL ? f(ptr, size, offset, handle, flags) : CUDA_ERROR_NOT_FOUND;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count)
{
    const CUresult e = injected("cuMemSetAccess");
    if (e != CUDA_SUCCESS)
        return e;
    CUresult (*f)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = real("cuMemSetAccess");
    return f != NULL ? f(ptr, size, desc, count) : CUDA_ERROR_NOT_FOUND;
}
