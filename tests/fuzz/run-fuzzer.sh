#!/bin/sh
# Runs a libFuzzer target for a bounded time on a copy of its seed corpus,
# so the committed corpus never changes. A crash input is kept in ARTIFACTS
# and printed in hex. (libFuzzer's own error exit code, 77, would read as
# "skipped" to meson.)
#   run-fuzzer.sh FUZZER SEED_DIR DICT ARTIFACTS SECONDS
set -eu
fuzzer=$1 seeds=$2 dict=$3 artifacts=$4 seconds=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$artifacts"
rm -f "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*
cp "$seeds"/* "$work/corpus/"
status=0
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=8192 \
    -error_exitcode=1 -timeout_exitcode=1 \
    -dict="$dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
    "$work/corpus" || status=$?
if [ "$status" -ne 0 ]; then
    for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*; do
        [ -f "$f" ] || continue
        echo "---- $f"
        od -An -tx1 "$f" | head -40
    done
fi
exit "$status"
