#!/bin/sh
# libnvshare.so lives in every process: it must need nothing but libc (not
# even the loader: its TLS is initial-exec, so no __tls_get_addr), need no
# glibc symbol version newer than 2.17, export only the driver hooks and dlsym
# (at both glibc versions), and run no code at load or at exit.
# Usage: check_elf.sh path/to/libnvshare.so
set -u
lib=$1
fail=0
err() { echo "FAIL: $*"; fail=1; }

needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for n in $needed; do
    case $n in
    libc.so.6) ;;
    *) err "NEEDED $n" ;;
    esac
done
echo "NEEDED: $needed"

exports=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}')
for s in $exports; do
    case $s in
    cu[A-Z]*) ;;
    dlsym@@GLIBC_2.34 | dlsym@GLIBC_2.2.5 | dlsym@GLIBC_2.17) ;;
    nvshare_process_owner@@NVSHARE_1) ;;
    *) err "unexpected export $s" ;;
    esac
done
echo "$exports" | grep -qx 'nvshare_process_owner@@NVSHARE_1' || err "nvshare_process_owner not exported"
echo "$exports" | grep -qx 'dlsym@@GLIBC_2.34' || err "dlsym@@GLIBC_2.34 not exported"
echo "$exports" | grep -qE '^dlsym@GLIBC_2\.(2\.5|17)$' || err "dlsym at the base glibc version not exported"
# Every route to GPU work and allocation is hooked, and the paths managed
# memory loses (CUDA IPC, GPUDirect RDMA), whose failures the library explains.
for s in cuGetProcAddress cuGetProcAddress_v2 cuLaunchKernel cuLaunchKernel_ptsz \
    cuLaunchKernelEx cuLaunchKernelEx_ptsz cuLaunchCooperativeKernel cuGraphLaunch \
    cuGraphLaunch_ptsz cuMemcpy cuMemcpyAsync_ptsz cuMemcpyHtoD_v2 cuMemcpyHtoD_v2_ptds \
    cuMemcpy2DUnaligned_v2 cuMemcpy3DPeerAsync cuMemcpyBatchAsync_v2 cuMemcpyPeer \
    cuMemsetD8_v2 cuMemsetD8Async_ptsz cuMemsetD2D32_v2_ptds cuMemPrefetchAsync \
    cuMemPrefetchAsync_v2_ptsz cuMemPrefetchBatchAsync cuStreamWriteValue32_v2 \
    cuStreamBatchMemOp cuMemAlloc_v2 cuMemAllocPitch_v2 cuMemFree_v2 cuMemAllocManaged \
    cuMemAllocAsync cuMemAllocFromPoolAsync_ptsz cuMemFreeAsync cuMemCreate cuMemRelease \
    cuMemGetInfo_v2 cuDeviceTotalMem_v2 cuDevicePrimaryCtxRetain cuCtxCreate_v4 \
    cuCtxDestroy_v2 cuStreamBeginCapture_v2 cuStreamEndCapture cuStreamDestroy_v2 cuLaunch \
    cuLaunchGrid cuLaunchGridAsync cuLaunchCooperativeKernelMultiDevice cuIpcGetMemHandle \
    cuMemGetHandleForAddressRange cuPointerGetAttribute cuPointerGetAttributes; do
    echo "$exports" | grep -qE "^$s(@@NVSHARE_1)?\$" || err "$s not exported"
done
echo "exports: $(echo "$exports" | wc -l) symbols"

# Loads in old images: no glibc symbol version newer than 2.17 (CentOS 7 and
# UBI 7, Debian 9 and later; aarch64's base version): one the image's glibc
# lacks stops every program, /bin/sh included (driver/base_glibc.h).
versions=$(objdump -T "$lib" | awk '/\*UND\*/' | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV)
highest=$(echo "$versions" | tail -n 1)
echo "glibc versions needed: $(echo "$versions" | tr '\n' ' ')"
newest=$(printf '%s\nGLIBC_2.17\n' "$highest" | sort -V | tail -n 1)
[ "$newest" = GLIBC_2.17 ] || err "needs $highest (newer than GLIBC_2.17): $(objdump -T "$lib" |
    awk '/\*UND\*/' | grep -E "\($highest\)" | awk '{print $NF}' | tr '\n' ' ')"

# No C++ runtime and no static constructors.
undef=$(nm -D --undefined-only "$lib" | awk '{print $2}')
echo "$undef" | grep -E '^_Z|__cxa_(throw|guard|begin_catch|allocate)|__gxx_personality|_Unwind' \
    && err "C++ runtime symbols are used"
nm "$lib" | grep -q '_GLOBAL__sub_I' && err "static constructors"

# What every process start pays (preload/meson.build, layout.ld): no code run
# at load or at exit (no start files), the writable pages mapped from the file
# alone (no anonymous .bss mapping), and never unloaded (dso_handle.cpp).
dynamic=$(readelf -dW "$lib")
for tag in INIT FINI INIT_ARRAY FINI_ARRAY PREINIT_ARRAY; do
    echo "$dynamic" | grep -q "($tag)" && err "dynamic entry $tag: code runs at load or exit"
done
echo "$dynamic" | grep -q 'FLAGS_1.*NODELETE' || err "not marked NODELETE (-z nodelete)"
readelf -lW "$lib" | awk '$1 == "LOAD" && $7 ~ /W/ && $5 != $6 {print; bad = 1} END {exit bad}' ||
    err "a writable segment is larger in memory than in the file (anonymous .bss at load)"
[ $fail -eq 0 ] && echo "OK"
exit $fail
