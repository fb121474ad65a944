#!/bin/sh
# compare.sh OLD_TREE NEW_TREE [FIRST_SEED LAST_SEED STEPS]
# Builds the scheduling core of two source trees into one program (the old
# one's namespace renamed) and compares their action streams, deadlines and
# queues on random event sequences; exit status 1 if any differs.
set -e
old=$(realpath "$1"); new=$(realpath "$2"); shift 2
here=$(dirname "$(realpath "$0")")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# The generated headers (config) of a configured build of either tree.
gen=${SCHEDULER_DIFF_BUILD:-$new/build}
srcs="daemon/client.cpp daemon/gpu_discovery.cpp daemon/gpu_table.cpp daemon/log.cpp
  daemon/member_classes.cpp daemon/claim_grace.cpp daemon/printable_text.cpp daemon/room.cpp
  daemon/run_ahead.cpp daemon/scheduler.cpp daemon/soft_followers.cpp daemon/soft_join.cpp
  daemon/turn_policy.cpp daemon/turn_styles.cpp daemon/usage.cpp daemon/wait_notices.cpp daemon/waiting_line.cpp
  common/units.cpp common/user_name.cpp common/write_all.cpp common/driver_gpus.cpp"
flags="-std=c++20 -O1 -I$gen"
for side in old new; do
    tree=$old; extra="-Dnvshare=nvold"
    [ $side = new ] && tree=$new && extra=""
    mkdir -p "$work/$side"
    for f in $srcs; do
        [ -f "$tree/$f" ] || continue
        g++ $flags $extra -I"$tree" -c "$tree/$f" -o "$work/$side/$(echo $f | tr / _).o"
    done
    g++ $flags $extra -DRUN=run_$side -I"$tree" -c "$here/driver.cpp" -o "$work/$side/driver.o"
done
g++ $flags "$here/main.cpp" "$work"/old/*.o "$work"/new/*.o -o "$work/compare"
"$work/compare" "$@"
