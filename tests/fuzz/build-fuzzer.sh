#!/bin/sh
# Builds one libFuzzer target with clang++ (the project compiler is g++):
# its sources as one translation unit (OUTPUT.cpp beside it, a file that
# includes each of them, as meson's unity build does), so the headers they
# share are compiled once and the depfile names the headers of all of them.
# The file stays: the depfile names it, and a missing one would make ninja
# build the target again every time.
#   build-fuzzer.sh CLANGXX OUTPUT DEPFILE SOURCE... -- COMPILER_FLAGS...
set -eu
clangxx=$1 output=$2 depfile=$3
shift 3
unity=$output.cpp
rm -f "$unity"
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in
    /*) echo "#include \"$1\"" ;;
    *) echo "#include \"$PWD/$1\"" ;;
    esac >> "$unity"
    shift
done
[ "$#" -gt 0 ] && shift  # the --
"$clangxx" "$@" "$unity" -o "$output" -MD -MF "$depfile" -MT "$output"
