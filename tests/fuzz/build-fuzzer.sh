#!/bin/sh
# Builds one libFuzzer target with clang++ (the project compiler is g++):
# each source compiled on its own, so the depfile names the headers of all of
# them (one clang++ call for several sources writes only the last one's).
#   build-fuzzer.sh CLANGXX OUTPUT DEPFILE SOURCE... -- COMPILER_FLAGS...
set -eu
clangxx=$1 output=$2 depfile=$3
shift 3
sources=
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
    sources="$sources $1"
    shift
done
[ "$#" -gt 0 ] && shift  # the --
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
objects= i=0
for src in $sources; do
    i=$((i + 1))
    "$clangxx" "$@" -c "$src" -o "$work/$i.o" -MD -MF "$work/$i.d" -MT "$output"
    objects="$objects $work/$i.o"
done
# shellcheck disable=SC2086  # word splitting wanted: paths from meson, no blanks
"$clangxx" "$@" $objects -o "$output"
cat "$work"/*.d > "$depfile"
