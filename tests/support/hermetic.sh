#!/bin/sh
# Runs one test as on a host where nvshare is not installed, whatever the
# host has: meson test's default setup puts this in front of every test
# (tests/meson.build). On a host where the README's first command ran,
# /etc/ld.so.preload lists the installed libnvshare.so (every process,
# sanitized test programs too, would load it: ASan refuses to start behind
# it), nvshared serves /run/nvshare and, where it started one, is on the
# system bus (/run/dbus), which nvsharectl asks first. The test then runs in
# a private mount namespace with an empty /etc/ld.so.preload and empty
# /run/nvshare and /run/dbus, so that it sees its own preload list, sockets
# and buses only. The host is never changed.
#
# NVSHARE_TEST_HOST=kept keeps the host's view: the installed-host pass
# (.ci/installed-host-test) lists a library on purpose. Without root (no
# mount namespace) the test runs as it is.
set -eu
if [ "${NVSHARE_TEST_HOST:-}" = kept ] || [ "$(id -u)" -ne 0 ] ||
    { [ ! -s /etc/ld.so.preload ] && [ ! -d /run/nvshare ] && [ ! -d /run/dbus ]; }; then
    exec "$@"
fi
# shellcheck disable=SC2016
exec unshare --mount --propagation private sh -c '
    set -eu
    if [ -s /etc/ld.so.preload ]; then
        empty=$(mktemp)
        chmod 0644 "$empty"
        mount --bind "$empty" /etc/ld.so.preload
        rm -f "$empty"
    fi
    [ ! -d /run/nvshare ] || mount -t tmpfs -o mode=0755 nvshare-test-run /run/nvshare
    [ ! -d /run/dbus ] || mount -t tmpfs -o mode=0755 nvshare-test-dbus /run/dbus
    export NVSHARE_TEST_HOST=kept
    exec "$@"' hermetic "$@"
