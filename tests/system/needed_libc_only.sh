#!/bin/sh
# Fails unless the shared object given links against libc alone (what every
# piece of libnvshare.so must do: it is loaded into every process).
set -eu
needed=$(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "$1 needs: $needed"
[ "$needed" = "libc.so.6" ]
