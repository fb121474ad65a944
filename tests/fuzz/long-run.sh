#!/bin/sh
# The long local run of one target (tests/RELIABILITY.md): SECONDS of fuzzing
# at low priority from the seed corpus, then the grown corpus minimised
# (-merge=1 into a fresh directory). Writes into OUT: log, corpus/ (grown),
# minimized/ (to copy over the seeds), crash-* artifacts.
#   long-run.sh FUZZER SEED_DIR DICT OUT SECONDS
set -eu
fuzzer=$1 seeds=$2 dict=$3 out=$4 seconds=$5
rm -rf "$out"
mkdir -p "$out/corpus" "$out/minimized"
cp "$seeds"/* "$out/corpus/"
status=0
nice -n 10 "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=8192 \
    -dict="$dict" -artifact_prefix="$out/" -print_final_stats=1 \
    "$out/corpus" >"$out/log" 2>&1 || status=$?
nice -n 10 "$fuzzer" -merge=1 -max_len=8192 "$out/minimized" "$out/corpus" >"$out/merge.log" 2>&1
# Too many files to commit: keep what covers every edge, not every hit count.
if [ "$(ls "$out/minimized" | wc -l)" -gt 600 ]; then
    rm -rf "$out/minimized" && mkdir "$out/minimized"
    nice -n 10 "$fuzzer" -merge=1 -use_counters=0 -max_len=8192 "$out/minimized" "$out/corpus" \
        >"$out/merge.log" 2>&1
fi
echo "exit $status; $(grep -E '^#[0-9]+.*DONE' "$out/log" | tail -1)"
echo "minimized: $(ls "$out/minimized" | wc -l) files, $(cat "$out/minimized"/* | wc -c) bytes"
echo "$(grep MERGE-OUTER "$out/merge.log" | tail -1)"
exit "$status"
