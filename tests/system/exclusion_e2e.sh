#!/bin/sh
# The admin's exclusion list really turns libnvshare.so into a pass-through.
# In a private mount namespace with an overlay over SYSCONFDIR (the host's is
# never changed), a program listed in SYSCONFDIR/nvshare/preload-exclude.conf never
# tries to reach nvshared; the same program unlisted does, and fails open with
# its one warning (no daemon runs at the socket path used here).
# Usage: exclusion_e2e.sh TEST_CLIENT FAKECUDA_DIR LIBNVSHARE SYSCONFDIR [RUNTIME]
# (RUNTIME: a sanitizer build's runtime, preloaded before the library)
set -u
[ "$(id -u)" = 0 ] || { echo "needs root for a mount namespace"; exit 77; }
client=$(readlink -f "$1") fakecuda=$2 lib=$3 etc=$4
if [ -n "${5:-}" ]; then lib="$5 $lib"; fi
[ -d "$etc" ] || { echo "$etc does not exist: nothing to overlay"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/up" "$tmp/work"
export client fakecuda lib tmp etc
unshare -m --propagation private sh -eu -c '
    mount -t overlay overlay -o "lowerdir=$etc,upperdir=$tmp/up,workdir=$tmp/work" "$etc"
    mkdir -p "$etc/nvshare"
    run() {
        LD_LIBRARY_PATH="$fakecuda" LD_PRELOAD="$lib" NVSHARE_SOCKET="$tmp/nobody.sock" \
            "$client" --kernels 1 --kernel-us 1000 >/dev/null 2>"$tmp/err"
    }
    name=$(basename "$client")
    printf "# not this one\nsomething-else\n" > "$etc/nvshare/preload-exclude.conf"
    run || { echo "FAIL: unlisted run failed"; cat "$tmp/err"; exit 1; }
    grep -q unscheduled "$tmp/err" || { echo "FAIL: unlisted program did not try nvshared"; cat "$tmp/err"; exit 1; }
    echo "ok: unlisted program is scheduled (fails open without a daemon)"
    for entry in "$name" "$client"; do
        printf "# by name or by path\n  %s  \n" "$entry" > "$etc/nvshare/preload-exclude.conf"
        run || { echo "FAIL: excluded run failed"; cat "$tmp/err"; exit 1; }
        if [ -s "$tmp/err" ]; then echo "FAIL: excluded as \"$entry\" but the library spoke:"; cat "$tmp/err"; exit 1; fi
        echo "ok: excluded by \"$entry\": pass-through, silent"
    done
    rm "$etc/nvshare/preload-exclude.conf"
    # The plain-memory list: device memory stays plain (CUDA IPC can export
    # it), unless the process asks for managed memory by NVSHARE_MANAGED=1.
    ipc() {
        LD_LIBRARY_PATH="$fakecuda" LD_PRELOAD="$lib" NVSHARE_SOCKET="$tmp/nobody.sock" "$@" \
            "$client" --kernels 1 --kernel-us 1000 --alloc 1M --ipc 2>"$tmp/err"
    }
    [ "$(ipc)" = "$(printf "alloc=ok\nipc=error\ndone=ok")" ] ||
        { echo "FAIL: unlisted program kept plain memory"; cat "$tmp/err"; exit 1; }
    printf "# keep plain device memory\n%s\n" "$name" > "$etc/nvshare/preload-plain.conf"
    [ "$(ipc)" = "$(printf "alloc=ok\nipc=ok\ndone=ok")" ] ||
        { echo "FAIL: program in the plain-memory list got managed memory"; cat "$tmp/err"; exit 1; }
    grep -q unscheduled "$tmp/err" || { echo "FAIL: listed program was not scheduled"; cat "$tmp/err"; exit 1; }
    echo "ok: listed in preload-plain.conf: plain device memory, still scheduled"
    [ "$(ipc env NVSHARE_MANAGED=1)" = "$(printf "alloc=ok\nipc=error\ndone=ok")" ] ||
        { echo "FAIL: NVSHARE_MANAGED=1 did not opt back in"; cat "$tmp/err"; exit 1; }
    echo "ok: NVSHARE_MANAGED=1 opts a listed program back into managed memory"
'
