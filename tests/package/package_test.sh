#!/bin/bash
# The Debian packages, end to end: build them (dpkg-buildpackage) from a
# scratch copy of the tree, run lintian, then install, upgrade, remove and
# purge them with the real dpkg and maintainer scripts in a throw-away root,
# checking after every step that /etc/ld.so.preload lists no missing library
# and that ordinary programs start without ld.so errors.
#
# The throw-away root: in private mount, PID, network, IPC and UTS
# namespaces, an overlay whose lower layer is the host's / (read only, never
# written) and whose upper layer is a tmpfs, with a fresh /proc, an empty
# /run (no systemd or D-Bus of the host to reach) and a /dev of four nodes;
# the steps run chrooted there. dpkg then sees the host's installed packages
# (nvshare's dependencies) and the real ld.so of every program reads the
# root's /etc/ld.so.preload; all writes vanish with the namespace.
#
# With DEB_DIR, the first build's packages are left there for the device
# plugin's image test (tests/deploy), which runs after this one.
#
# usage: package_test.sh SOURCE_ROOT CUDA_HEADERS [DEB_DIR]
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo; echo "== $* (${SECONDS}s)"; }

# ---------------------------------------------------------------- in the root
if [ "${1:-}" = --in-root ]; then
    w=$2 v1=$3 v2=$4 arch=$5
    lib_token=lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
    library=/usr/$lib_token/libnvshare.so
    dropin=/etc/ld.so.preload.d/nvshare.conf
    log=$(mktemp)

    # Every entry of /etc/ld.so.preload (glibc's parsing: '#' to the end of
    # the line is a comment; blanks and colons separate) names a file, and
    # programs run with an empty stderr.
    check_preload() {
        if [ -e /etc/ld.so.preload ]; then
            local e f
            for e in $(sed 's/#.*//' /etc/ld.so.preload | tr ':\t' '  '); do
                f=${e//\$\{LIB\}/$lib_token}
                f=${f//\$LIB/$lib_token}
                [ -e "$f" ] || fail "/etc/ld.so.preload lists $e, which does not exist"
            done
        fi
        local prog err
        for prog in /bin/true "ls /" "sh -c :" "dpkg-query -W dpkg"; do
            err=$($prog 2>&1 >/dev/null) || fail "'$prog' failed: $err"
            [ -z "$err" ] || fail "'$prog' printed: $err"
        done
    }
    listed() { [ -e /etc/ld.so.preload ] && grep -q 'libnvshare\.so' /etc/ld.so.preload; }
    # The real ld.so mapped the library into a new process.
    loaded() { grep -q "$library" /proc/self/maps; }
    expect_listed() {
        listed || fail "libnvshare.so is not in /etc/ld.so.preload"
        loaded || fail "a new process did not load $library"
    }
    expect_unlisted() {
        ! listed || fail "/etc/ld.so.preload still lists libnvshare.so: $(cat /etc/ld.so.preload)"
        ! loaded || fail "a new process loaded $library"
    }
    # dpkg, expecting success (ok) or refusal (refused); every maintainer
    # script and helper it starts is a new process, so a listed library
    # missing at any moment of the run shows up as an ld.so error here.
    dpkg_step() {
        local expect=$1 rc=0
        shift
        dpkg "$@" >"$log" 2>&1 || rc=$?
        sed 's/^/    /' "$log"
        if [ "$expect" = ok ] && [ $rc -ne 0 ]; then fail "dpkg $* failed ($rc)"; fi
        if [ "$expect" = refused ] && [ $rc -eq 0 ]; then fail "dpkg $* was not refused"; fi
        if grep -q 'ERROR: ld\.so' "$log"; then fail "dpkg $* printed ld.so errors"; fi
        check_preload
    }
    deb() { echo "$w/$1/$2_$1_$arch.deb"; }
    status_of() { dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null || true; }

    # man-db's trigger would rebuild its index on every step: seconds each.
    rm -f /var/lib/man-db/auto-update

    step "a root without nvshare: what an install outside dpkg left is removed (here only)"
    # The README's first command installs with meson (libnvshare.so listed,
    # a drop-in, units, state): this root sees it through its lower layer.
    # dpkg owns none of it (checked below), so the packages meet a host that
    # never had nvshare; the host keeps its install. The check first: files a
    # package owns are never removed here.
    for p in nvshare libnvshare; do
        case $(status_of $p) in *" installed "*) fail "the host has $p installed";; esac
    done
    find /usr /etc /var/lib \( -name '*nvshare*' -o -name 'ld.so.preload' \) -prune \
        -exec rm -rf {} +

    step "the checks see a listed library that is missing (the real ld.so reads this root's file)"
    echo /usr/lib/nvshare-test-missing.so >/etc/ld.so.preload
    if (check_preload) 2>/dev/null; then fail "check_preload missed a missing library"; fi
    # (grep and rm print the error too; what matters is that /bin/true does.)
    /bin/true 2>&1 | grep -q 'ERROR: ld.so' 2>/dev/null || fail "ld.so printed nothing for a missing library"
    rm /etc/ld.so.preload 2>/dev/null
    check_preload

    step "nvshare alone: refused for the missing dependency, unpacked, nothing listed"
    dpkg_step refused -i "$(deb "$v1" nvshare)"
    # dpkg puts a new conffile in place only on configuration.
    [ -f "$dropin.dpkg-new" ] && [ ! -e "$dropin" ] || fail "the drop-in is not waiting as .dpkg-new"
    expect_unlisted

    step "libnvshare, then nvshare configured: the library is listed"
    dpkg_step ok -i "$(deb "$v1" libnvshare)"
    expect_unlisted
    dpkg_step ok --configure -a
    expect_listed
    for unit in sockets.target.wants/nvshare.socket paths.target.wants/nvshare-preload.path; do
        [ -L "/etc/systemd/system/$unit" ] || fail "$unit is not enabled"
    done
    ! ls /etc/systemd/system/*.wants/nvshare.service 2>/dev/null ||
        fail "nvshare.service is enabled; the socket starts it"

    step "libnvshare cannot go while nvshare needs it"
    dpkg_step refused -r libnvshare
    expect_listed

    step "upgrade to $v2"
    dpkg_step ok -i "$(deb "$v2" libnvshare)" "$(deb "$v2" nvshare)"
    [ "$(status_of nvshare)" = "install ok installed $v2" ] || fail "nvshare: $(status_of nvshare)"
    expect_listed

    step "remove nvshare: unlisted first, libnvshare stays"
    dpkg_step ok -r nvshare
    expect_unlisted
    [ "$(status_of nvshare)" = "deinstall ok config-files $v2" ] || fail "nvshare: $(status_of nvshare)"
    [ -f "$library" ] || fail "libnvshare.so went with nvshare"

    step "install nvshare again: listed again"
    dpkg_step ok -i "$(deb "$v2" nvshare)"
    expect_listed
    [ -f "$dropin" ] && [ ! -e "$dropin.dpkg-removed" ] || fail "the drop-in was not restored"

    step "'nvsharectl preload disable' holds across a reinstallation"
    nvsharectl preload disable
    check_preload
    expect_unlisted
    dpkg_step ok -i "$(deb "$v2" nvshare)"
    expect_unlisted
    nvsharectl preload enable
    expect_listed

    step "purge nvshare"
    dpkg_step ok -P nvshare
    expect_unlisted
    [ -z "$(status_of nvshare)" ] || [ "$(status_of nvshare)" = "unknown ok not-installed " ] ||
        fail "nvshare: $(status_of nvshare)"
    for f in "$dropin" "$dropin.dpkg-removed" /var/lib/nvshare \
        /etc/systemd/system/sockets.target.wants/nvshare.socket; do
        [ ! -e "$f" ] || fail "$f is left after the purge"
    done

    step "remove and purge libnvshare"
    dpkg_step ok -r libnvshare
    [ ! -e "$library" ] || fail "$library is left"
    dpkg_step ok -P libnvshare
    expect_unlisted
    echo; echo "root steps passed (${SECONDS}s)"
    exit 0
fi

# ----------------------------------------------------------- in the namespace
if [ "${1:-}" = --in-namespace ]; then
    w=$2
    root=$w/root
    mkdir -p "$root" "$w/layer"
    mount -t tmpfs -o mode=0755 nvshare-package-test "$w/layer"
    mkdir "$w/layer/upper" "$w/layer/work"
    mount -t overlay -o "lowerdir=/,upperdir=$w/layer/upper,workdir=$w/layer/work" \
        nvshare-package-test "$root"
    mount -t proc proc "$root/proc"
    mount -t tmpfs -o mode=0755 nvshare-package-test "$root/run"
    mount -t tmpfs -o mode=0755 nvshare-package-test "$root/dev"
    mknod -m 666 "$root/dev/null" c 1 3
    mknod -m 666 "$root/dev/zero" c 1 5
    mknod -m 666 "$root/dev/random" c 1 8
    mknod -m 666 "$root/dev/urandom" c 1 9
    # $w and this script lie on the host's / and so are in the lower layer.
    exec chroot "$root" /bin/bash "$(realpath "$0")" --in-root "${@:2}"
fi

# --------------------------------------------------------------- the outside
src=$(realpath "$1")
export CUDA_HEADERS=$2
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (private namespaces, dpkg in a throw-away root)"
    exit 77
fi
for tool in dpkg-buildpackage dh lintian fakeroot unshare chroot; do
    command -v "$tool" >/dev/null || fail "$tool is missing: run .ci/install-deps --tests"
done

w=$(mktemp -d "${TMPDIR:-/tmp}/nvshare-package.XXXXXX")
# The namespace's mounts vanish with it; only the build files are left here.
trap 'rm -rf "$w"' EXIT

step "scratch copy of $src"
mkdir "$w/src"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Tracked and untracked files, not what .gitignore leaves out (builds).
    (cd "$src" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$w/src")
else
    tar -C "$src" --exclude='./build*' --exclude='./obj-*' -cf - . | tar -C "$w/src" -xf -
fi

# Unoptimised and without debug information (noopt, -g stripped, so no
# -dbgsym packages: noautodbgsym): this test checks the packaging, not the
# code, and the build file by file is most of its time. That build still
# finds a source file that misses an include, which the unity builds of the
# other passes cannot.
build() {
    local t0=$SECONDS
    (cd "$w/src" && DEB_BUILD_OPTIONS="parallel=$(nproc) noopt noautodbgsym" DEB_CFLAGS_STRIP=-g \
        DEB_CXXFLAGS_STRIP=-g dpkg-buildpackage -us -uc -b "$@") \
        >"$w/build.log" 2>&1 || { tail -40 "$w/build.log"; fail "dpkg-buildpackage $* failed"; }
    echo "built in $((SECONDS - t0))s"
}

arch=$(dpkg --print-architecture)
v1=$(dpkg-parsechangelog -l "$w/src/debian/changelog" -S Version)
v2=$v1+upgradetest1

step "dpkg-buildpackage -us -uc -b ($v1)"
build
mkdir "$w/$v1"
mv "$w"/*.deb "$w"/*.changes "$w"/*.buildinfo "$w/$v1/"
if [ -n "${3:-}" ]; then
    rm -rf "$3" && mkdir -p "$3" && cp "$w/$v1"/*.deb "$3/"
fi

step "lintian"
lintian --fail-on error,warning "$w/$v1/nvshare_${v1}_$arch.changes" ||
    fail "lintian reports errors or warnings"

step "dpkg-buildpackage -nc ($v2, the same build, packaged with a new changelog entry)"
{
    printf 'nvshare (%s) unstable; urgency=medium\n\n  * Upgrade test.\n\n -- %s  %s\n\n' \
        "$v2" "$(dpkg-parsechangelog -l "$w/src/debian/changelog" -S Maintainer)" "$(date -R)"
    cat "$w/src/debian/changelog"
} >"$w/changelog" && mv "$w/changelog" "$w/src/debian/changelog"
build -nc
mkdir "$w/$v2"
mv "$w"/*.deb "$w"/*.changes "$w"/*.buildinfo "$w/$v2/"

step "install, upgrade, remove, purge in a throw-away root"
unshare --mount --propagation private --pid --fork --net --ipc --uts \
    /bin/bash "$(realpath "$0")" --in-namespace "$w" "$v1" "$v2" "$arch"
echo; echo "package test passed in ${SECONDS}s"
