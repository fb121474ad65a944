#!/bin/sh
# meson install step: bring /etc/ld.so.preload in line with the drop-in just
# installed. Changes the system only for a real install (no DESTDIR) under
# /usr, and only once the library exists: the library is in place before the
# line that names it.
set -eu
nvsharectl=$1 library=$2 prefix=$3
if [ -n "${DESTDIR:-}" ]; then
    echo "nvshare: DESTDIR is set; not touching /etc/ld.so.preload (run 'nvsharectl preload merge' on the target)"
    exit 0
fi
if [ "$prefix" != /usr ]; then
    echo "nvshare: prefix is $prefix, not /usr; not touching /etc/ld.so.preload (see 'nvsharectl preload enable')"
    exit 0
fi
if [ ! -f "$library" ]; then
    echo "nvshare: $library is not installed; /etc/ld.so.preload left as it is"
    exit 0
fi
exec "$nvsharectl" preload merge
