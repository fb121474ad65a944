#!/bin/bash
# nvshare-device-plugin's container image (deploy/Containerfile), built by a
# real podman from the Debian packages and run as
# deploy/nvshare-device-plugin.yaml runs it: root without any capability
# (--cap-drop=ALL, no new privileges), a read-only root file system, and no
# host path but a device-plugins directory, the lock socket's directory
# (read-only) and node-feature-discovery's features.d, each a directory of
# the test's. nvshared runs from the same image in a second container that
# shares the socket directory; both read a made-up driver list of two GPUs
# (mounted at /gpus: this host has no /proc/driver/nvidia). A fake kubelet
# (image_kubelet_test.cpp) then checks registration, the Healthy devices and
# Allocate through the mounts; on SIGTERM the plugin removes its socket and
# the features file.
#
# The base image: a debootstrap root (Debian 12 minbase plus the packages'
# dependencies, read from the .debs) imported with `podman import`, so no
# registry is needed; its tarball is cached in /var/cache/nvshare-ci
# (NVSHARE_CI_CACHE), keyed by that package list (minutes to build once,
# seconds after). Podman keeps its storage in the scratch directory (vfs
# driver), --cgroup-manager=cgroupfs, --network=none, runc where installed,
# all in a private mount namespace.
#
# Skipped (77), with the reason, without root, podman, debootstrap or the
# packages (NVSHARE_DEB_DIR, else DEB_DIR: the three .debs of one build), or
# where podman cannot run a container here.
#
# usage: plugin_image_test.sh SOURCE_ROOT DEB_DIR KUBELET_CHECK
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo; echo "== $* (${SECONDS}s)"; }

if [ "${1:-}" != --in-namespace ]; then
    [ "$(id -u)" -eq 0 ] || skip "needs root: podman here runs rootful, in a private mount namespace"
    for tool in podman debootstrap unshare dpkg-deb flock; do
        command -v "$tool" >/dev/null ||
            skip "$tool is not installed (.ci/install-deps --tests installs it)"
    done
    exec unshare --mount --propagation private /bin/bash "$(realpath "$0")" --in-namespace "$@"
fi
shift
src=$(realpath "$1")
debs=${NVSHARE_DEB_DIR:-$2}
check=$(realpath "$3")

# ------------------------------------------------------------ the packages
arch=$(dpkg --print-architecture)
plugin_deb=$(find "$debs" -maxdepth 1 -name "nvshare-device-plugin_*_$arch.deb" 2>/dev/null |
    sort -V | tail -1 || true)
[ -n "$plugin_deb" ] ||
    skip "no nvshare-device-plugin_*_$arch.deb in $debs (build the packages with dpkg-buildpackage, or set NVSHARE_DEB_DIR)"
version=$(dpkg-deb -f "$plugin_deb" Version)
pkgs=("$debs/nvshare_${version}_$arch.deb" "$debs/libnvshare_${version}_$arch.deb" "$plugin_deb")
for p in "${pkgs[@]}"; do
    [ -f "$p" ] || skip "$(basename "$p") is missing beside $(basename "$plugin_deb")"
done

w=$(mktemp -d "${TMPDIR:-/tmp}/nvshare-plugin-image.XXXXXX")
podman_base=(podman --root "$w/storage/root" --runroot "$w/storage/run" --tmpdir "$w/storage/tmp"
    --storage-driver vfs --cgroup-manager cgroupfs --events-backend file)
if command -v runc >/dev/null; then podman_base+=(--runtime "$(command -v runc)"); fi
pm() { "${podman_base[@]}" "$@"; }
# Lowering the limits needs no privilege; podman's defaults would raise them,
# which a container host without CAP_SYS_RESOURCE refuses.
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
cleanup() {
    pm rm -f -t 0 nvshare-test-plugin nvshare-test-nvshared >/dev/null 2>&1 || true
    rm -rf "$w"
}
trap cleanup EXIT

# ----------------------------------------------------------- the base image
step "base root file system: Debian 12 minbase with the packages' dependencies"
deps=$(for p in "${pkgs[@]}"; do dpkg-deb -f "$p" Depends; echo ,; done |
    tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/:.*//; s/[[:space:]]//g' |
    grep -vx -e '' -e nvshare -e libnvshare -e nvshare-device-plugin | sort -u | tr '\n' ' ')
echo "dependencies: $deps"
mirror=${NVSHARE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${NVSHARE_CI_CACHE:-/var/cache/nvshare-ci}
key=$(echo "1 bookworm $mirror $deps" | sha256sum | cut -c1-16)
base_tar=$cache/plugin-base-$key.tar
mkdir -p "$cache"
(
    flock 9  # one builder at a time
    if [ ! -f "$base_tar" ]; then
        rm -f "$cache"/plugin-base-*.tar  # other package lists: out of date
        echo "building it with debootstrap ($mirror); cached as $base_tar"
        root=$w/base-root
        # shellcheck disable=SC2086
        debootstrap --variant=minbase --include="$(echo $deps | tr ' ' ,)" bookworm "$root" \
            "$mirror" >"$w/debootstrap.log" 2>&1 ||
            { tail -30 "$w/debootstrap.log"; fail "debootstrap failed"; }
        rm -f "$root"/var/cache/apt/archives/*.deb
        tar -C "$root" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
            -cf "$base_tar.tmp" .
        mv "$base_tar.tmp" "$base_tar"
        rm -rf "$root"
    else
        echo "from the cache: $base_tar"
    fi
) 9>"$cache/plugin-base.lock"

step "podman import; a probe container"
pm import "$base_tar" localhost/nvshare-plugin-base:test >/dev/null ||
    skip "podman import failed here"
pm run --rm --network=none "${limits[@]}" localhost/nvshare-plugin-base:test /bin/true ||
    skip "podman cannot run a container on this host (see its error above)"
echo "ok: podman runs a container here"

# ----------------------------------------------------------------- the image
step "podman build -f deploy/Containerfile ($version)"
mkdir "$w/context"
cp "${pkgs[@]}" "$w/context/"
image=localhost/nvshare-device-plugin:$version
pm build --network=none --pull=never "${limits[@]}" -f "$src/deploy/Containerfile" \
    --build-arg BASE=localhost/nvshare-plugin-base:test -t "$image" "$w/context" \
    >"$w/build.log" 2>&1 || { tail -40 "$w/build.log"; fail "podman build failed"; }
echo "ok: built $image"

# As the DaemonSet runs its containers.
confined=(--network=none "${limits[@]}" --read-only --cap-drop=ALL
    --security-opt no-new-privileges --user 0:0)
out=$(pm run --rm "${confined[@]}" "$image" --version)
[ "$out" = "nvshare-device-plugin $version" ] || fail "--version printed '$out'"
echo "ok: $out"
if pm run --rm "${confined[@]}" --entrypoint /bin/grep "$image" -qs libnvshare /etc/ld.so.preload
then fail "the image lists libnvshare.so in /etc/ld.so.preload"; fi
echo "ok: the image's /etc/ld.so.preload lists no libnvshare.so"

# ------------------------------------------------------------ the containers
step "nvshared and the plugin, each in a confined container"
mkdir -p "$w/device-plugins" "$w/run-nvshare" "$w/features.d"
for n in 1 2; do
    mkdir -p "$w/gpus/0000:0$n:00.0"
    printf 'Model: \t\t Test GPU\nGPU UUID: \t GPU-0000000%s-0000-0000-0000-00000000000%s\n' \
        "$n" "$n" >"$w/gpus/0000:0$n:00.0/information"
done
pm run -d --name nvshare-test-nvshared "${confined[@]}" -v "$w/run-nvshare:/run/nvshare" \
    -v "$w/gpus:/gpus:ro" --tmpfs /var/lib/nvshare --entrypoint /usr/sbin/nvshared "$image" \
    --socket /run/nvshare/nvshare.sock --no-bus --gpu-info-dir /gpus \
    --state-dir /var/lib/nvshare >/dev/null
features=/etc/kubernetes/node-feature-discovery/features.d
pm run -d --name nvshare-test-plugin "${confined[@]}" \
    -v "$w/device-plugins:/var/lib/kubelet/device-plugins" \
    -v "$w/run-nvshare:/run/nvshare:ro" -v "$w/features.d:$features" -v "$w/gpus:/gpus:ro" \
    "$image" --no-write-preload-file --node-features "$features/nvshare" --shares 3 \
    --poll-interval 100ms --gpu-info-dir /gpus >/dev/null

pid=$(pm inspect -f '{{.State.Pid}}' nvshare-test-plugin)
[ "$pid" -gt 0 ] || fail "the plugin's container is not running: $(pm logs nvshare-test-plugin 2>&1)"
grep -E '^(Uid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' "/proc/$pid/status"
for f in CapInh CapPrm CapEff CapBnd CapAmb; do
    grep -qE "^$f:[[:space:]]+0+$" "/proc/$pid/status" || fail "the plugin has $f capabilities"
done
grep -qE '^NoNewPrivs:[[:space:]]+1$' "/proc/$pid/status" || fail "NoNewPrivs is not set"
echo "ok: the plugin runs as uid 0 without any capability, with no new privileges"
if pm exec nvshare-test-plugin /bin/touch /probe 2>/dev/null; then
    fail "the container's root file system is writable"
fi
echo "ok: its root file system is read-only"

step "a fake kubelet in the device-plugins directory"
NVSHARE_TEST_DEVICE_PLUGINS=$w/device-plugins NVSHARE_TEST_GPUS=2 NVSHARE_TEST_SHARES=3 \
    "$check" || { pm logs nvshare-test-plugin; fail "the kubelet's checks failed"; }
got=$(cat "$w/features.d/nvshare")
[ "$got" = $'nvshare.com/gpu.shared=true\nnvshare.com/gpu.shares-per-gpu=3' ] ||
    fail "features file: '$got'"
echo "ok: the features file: $(echo "$got" | tr '\n' ' ')"

step "SIGTERM"
pm stop -t 20 nvshare-test-plugin >/dev/null
status=$(pm inspect -f '{{.State.ExitCode}}' nvshare-test-plugin)
log=$(pm logs nvshare-test-plugin 2>&1)
# shellcheck disable=SC2001
sed 's/^/    /' <<<"$log"
[ "$status" = 0 ] || fail "the plugin exited with $status"
[ ! -e "$w/features.d/nvshare" ] || fail "the features file is left"
[ ! -e "$w/device-plugins/nvshare-gpu.sock" ] || fail "the plugin's socket is left"
grep -q 'registered nvshare.com/gpu with the kubelet' <<<"$log" ||
    fail "the log lacks the registration"
echo "ok: exit 0, its socket and the features file removed"
echo; echo "plugin image test passed in ${SECONDS}s"
