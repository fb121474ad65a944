#!/bin/sh
# libnvshare.so must build and link for aarch64 (Grace Hopper) too: this
# cross-compiles the library with the flags preload/meson.build uses, links it
# with the version script filled in for aarch64, and checks the result's
# machine, version nodes, dlsym versions and NEEDED entries.
# Usage: check_aarch64.sh SOURCE_ROOT BUILD_ROOT CUDA_INCLUDE_DIR LINK_FLAG...
# (the LINK_FLAGs: preload/meson.build's libnvshare_link_flags).
# Skips (exit 77) where the cross compiler is not installed.
set -u
src=$1 build=$2 cuda=$3
shift 3
cxx=aarch64-linux-gnu-g++
if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "SKIP: $cxx not found (Debian 12: apt-get install g++-aarch64-linux-gnu;" \
        ".ci/install-deps --tests installs it)"
    exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sed 's/@GLIBC_BASE@/GLIBC_2.17/g' "$src/preload/libnvshare.map.in" >"$out/libnvshare.map"
flags="-std=c++20 -O2 -fPIC -Wall -Wextra -Wpedantic -Werror -Wshadow -Wconversion
    -Wno-sign-conversion -D_GNU_SOURCE -fno-exceptions -fno-rtti -fno-asynchronous-unwind-tables
    -fno-threadsafe-statics -fvisibility=hidden -fvisibility-inlines-hidden
    -ftls-model=initial-exec -I$src -I$build -I$cuda"
objs=""
for f in $(find "$src/preload" -name "*.cpp" | sort); do
    o="$out/$(basename "$f" .cpp).o"
    # shellcheck disable=SC2086
    $cxx $flags -c "$f" -o "$o" || { echo "FAIL: compiling $f for aarch64"; exit 1; }
    objs="$objs $o"
done
# shellcheck disable=SC2086
$cxx -shared -o "$out/libnvshare.so" $objs -Wl,--version-script="$out/libnvshare.map" "$@" ||
    { echo "FAIL: linking libnvshare.so for aarch64"; exit 1; }
lib=$out/libnvshare.so
fail=0
err() { echo "FAIL: $*"; fail=1; }
readelf -h "$lib" | grep -q 'Machine:.*AArch64' || err "not an AArch64 object"
defs=$(readelf -V "$lib" | sed '/Version needs/,$d' | sed -n 's/.*Name: \(GLIBC_[0-9.]*\).*/\1/p' | sort -u | tr '\n' ' ')
echo "glibc version nodes: $defs"
case " $defs " in *" GLIBC_2.17 "*) ;; *) err "no GLIBC_2.17 node" ;; esac
case " $defs " in *" GLIBC_2.34 "*) ;; *) err "no GLIBC_2.34 node" ;; esac
case " $defs " in *" GLIBC_2.2.5 "*) err "an x86_64 version node on aarch64" ;; esac
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
echo "$exports" | grep -qx 'dlsym@GLIBC_2.17' || err "dlsym@GLIBC_2.17 not exported"
echo "$exports" | grep -qx 'dlsym@@GLIBC_2.34' || err "dlsym@@GLIBC_2.34 not exported"
echo "$exports" | grep -qx 'cuLaunchKernel@@NVSHARE_1' || err "cuLaunchKernel not exported"
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "NEEDED: $needed"
[ "$needed" = "libc.so.6 " ] || err "needs more than libc: $needed"
# GLIBC_2.17, aarch64's base version, is the newest it may need (check_elf.sh).
versions=$(readelf -V "$lib" | sed -n '/Version needs/,$p' |
    sed -n 's/.*Name: \(GLIBC_[0-9.]*\).*/\1/p' | sort -uV | tr '\n' ' ')
echo "glibc versions needed: $versions"
[ "$versions" = "GLIBC_2.17 " ] || err "needs a glibc version other than GLIBC_2.17: $versions"
[ $fail -eq 0 ] && echo "OK: libnvshare.so builds and links for aarch64"
exit $fail
