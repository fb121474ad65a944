#!/usr/bin/env python3
"""What each switch cost in one run, from libnvshare's debug log (issue 44's
switch targets): the time from nvshared's grant to the next holder's data
swapped in, against the longer of the copies out and in at the bus's rate.

  switch_report.py [--out-gbs 55] [--in-gbs 55] [--both-gbs 50] [--json]
                   [--min-gib 1] FILE...

FILE: the standard error of each process of one run, with NVSHARE_DEBUG=1
(oversub_bench.py and sweep_bench.py keep them with --keep-workdir, as
CONFIG-N.err). Every process's lines carry the same monotonic clock.

A switch is a grant that swapped in at least --min-gib. It took from
nvshared's grant to the holder's data swapped in, as its "lock granted" line
says ("ready N ms after nvshared's grant"). Its releaser is the last process
to let go before the grant ("let go before swapping out", where its copies
out overlap the next holder's copies in, or "released") with no other grant
between; none where the grant follows an exit (not in the log) or joins
other holders. A log of a library older than that line: the switch is timed
from that release, or from the next holder's later ask (its work resumed
after a pause), and left out without a release.

A room round: a holder whose new memory found the GPU full asks nvshared
for room ("asking nvshared for room"), nvshared asks a waiter to leave less
(its Shrink, "nvshared asks for room"), and the waiter swaps out: the room
is there. Each round's line: when the holder asked, the holder and the
giver, the milliseconds from the ask to the end of the giver's swap-out
(took) and to its reading of the Shrink (read), the swap-out's milliseconds
and GiB, and of its milliseconds those spent making host memory (making;
`-` in the log of a library before that was said).
The rounds' summary: the milliseconds per GiB given over all rounds, and
the medians of the read, swap-out and making times.

Columns: when the holder was ready, the releaser, the next holder, the
seconds the switch took, the GiB the releaser swapped out for it and the
next holder swapped in, the bound (the longer of out and in, each at its
rate alone, or both at --both-gbs where both moved), `took / bound`, and the
time the swap-in spent waiting for room. The summary: the median `took /
bound` (target 1.15), and the seconds per GiB moved of the first switch that
moved about as much as the run's median (within 2x) against the median of
the later such ones' (target 1.2).
"""
import argparse
import json
import re
import statistics
import sys

READY = re.compile(r"ready (?P<ms>\d+) ms after nvshared's grant")
ROOM_ASK = re.compile(r"^GPU \d+ lacks (?P<mib>\d+) MiB for our new memory: asking nvshared "
                      r"for room")
LINE = re.compile(r"^\[nvshare (?P<t>[0-9.]+)\] pid (?P<pid>\d+): (?P<msg>.*)$")
SWAP_IN = re.compile(r"^swapped in (?P<b>\d+) bytes to GPU \d+ in (?P<ms>\d+) ms .*; "
                     r"(?P<wait>\d+) ms waiting for room\)")
SWAP_OUT = re.compile(r"^swapped out (?P<b>\d+) bytes from GPU \d+ in (?P<ms>\d+) ms "
                      r"\(host memory made meanwhile: (?P<made>\d+) MiB, (?P<fault>\d+) ms "
                      r"faulting it in, (?P<reg>\d+) ms registering it"
                      r"(?:; (?P<making>\d+) ms of the swap-out making it)?\)")
GIB = 1 << 30
# Issue 44's targets: a switch's took/bound, and the first switch of its size
# against the later ones.
TARGET_RATIO = 1.15
TARGET_FIRST = 1.2


def log_lines(paths):
    """Every line of the given debug logs, one file after another."""
    lines = []
    for path in paths:
        with open(path, errors="replace") as f:
            lines += f.read().splitlines()
    return lines


def events(lines):
    """(time, pid, kind, facts) in time order: kind is grant, swap_in, ask
    (work resumed after a pause it let go in), let_go (before its
    swap-out), released, swap_out, room_ask (a holder asks for room) and
    shrink (nvshared asked this process for room)."""
    out = []
    for line in lines:
        m = LINE.match(line.strip())
        if not m:
            continue
        t, pid, msg = float(m["t"]), int(m["pid"]), m["msg"]
        if msg.startswith("lock granted"):
            r = READY.search(msg)
            out.append((t, pid, "grant", {"ready_ms": int(r["ms"]) if r else None}))
        elif msg.startswith("work resumed after a pause"):
            out.append((t, pid, "ask", {}))
        elif msg.startswith("let go before swapping out"):
            out.append((t, pid, "let_go", {}))
        elif msg.startswith("released"):
            out.append((t, pid, "released", {}))
        elif (s := SWAP_IN.match(msg)):
            out.append((t, pid, "swap_in", {"bytes": int(s["b"]), "ms": int(s["ms"]),
                                             "wait_ms": int(s["wait"])}))
        elif (s := SWAP_OUT.match(msg)):
            out.append((t, pid, "swap_out", {"bytes": int(s["b"]), "ms": int(s["ms"]),
                                              "pin_ms": int(s["fault"]) + int(s["reg"]),
                                              "made_mib": int(s["made"]),
                                              "making_ms": (int(s["making"])
                                                            if s["making"] else None)}))
        elif (s := ROOM_ASK.match(msg)):
            out.append((t, pid, "room_ask", {"mib": int(s["mib"])}))
        elif msg.startswith("nvshared asks for room"):
            out.append((t, pid, "shrink", {}))
    out.sort(key=lambda e: e[0])
    return out


def releases(evs):
    """Each process's releases: [time, pid, bytes swapped out for it]. One
    that let go before its swap-out is timed there and owns the swap-outs up
    to its "released" line; one that did not is timed at that line and owns
    the swap-outs since the process's grant."""
    rel, open_at, since_grant = [], {}, {}
    for t, pid, kind, f in evs:
        if kind == "grant":
            since_grant[pid] = 0
        elif kind == "let_go":
            open_at[pid] = len(rel)
            rel.append([t, pid, 0])
        elif kind == "swap_out":
            if pid in open_at:
                rel[open_at[pid]][2] += f["bytes"]
            else:
                since_grant[pid] = since_grant.get(pid, 0) + f["bytes"]
        elif kind == "released":
            if open_at.pop(pid, None) is None:
                rel.append([t, pid, since_grant.pop(pid, 0)])
    return rel


def switches(evs, min_bytes):
    rel = releases(evs)
    grants = [(t, pid) for t, pid, kind, _ in evs if kind == "grant"]
    last_in, asked = {}, {}
    out = []
    for t, pid, kind, f in evs:
        if kind == "swap_in":
            last_in[pid] = f
        elif kind == "ask":
            asked[pid] = t
        elif kind == "grant":
            s = last_in.pop(pid, None)
            ask = asked.pop(pid, 0.0)
            if not s or s["bytes"] < min_bytes:
                continue
            ready = f["ready_ms"]
            at = t - ready / 1000 if ready is not None else t
            # The releaser: the last release before the grant, with no
            # grant between (a grant after an exit, or a join beside
            # holders, has none).
            before = [r for r in rel if r[0] <= at and r[1] != pid
                      and not any(r[0] < g[0] < at for g in grants)]
            r = before[-1] if before else None
            if ready is not None:
                took = ready / 1000  # the grant to swapped in
            elif r is not None:
                took = t - max(r[0], ask)  # a holder that asked later waited from then
            else:
                continue
            out.append({"t": t, "releaser": r[1] if r else None, "holder": pid, "took_s": took,
                        "from": "grant" if ready is not None else "release",
                        "out_bytes": r[2] if r else 0, "in_bytes": s["bytes"],
                        "wait_ms": s["wait_ms"], "in_ms": s["ms"]})
    return out


def room_rounds(evs):
    """Each room round: a holder's ask, the first Shrink another process read
    after it (before the holder's next ask) and that process's next swap-out,
    which ends the round (the room is there; the holder's memory that finds
    it has no data to copy and says nothing). An ask no giver answered is
    left out."""
    out = []
    for k, (t, pid, kind, f) in enumerate(evs):
        if kind != "room_ask":
            continue
        later = evs[k + 1:]
        nxt = next((e[0] for e in later if e[1] == pid and e[2] == "room_ask"), float("inf"))
        read = next((e for e in later if e[1] != pid and e[2] == "shrink" and e[0] < nxt), None)
        if read is None:
            continue
        given = next((e for e in later if e[1] == read[1] and e[2] == "swap_out"
                      and e[0] >= read[0]), None)
        if given is None:
            continue
        out.append({"t": t, "holder": pid, "giver": read[1],
                    "took_ms": (given[0] - t) * 1000, "read_ms": (read[0] - t) * 1000,
                    "out_ms": given[3]["ms"], "out_bytes": given[3]["bytes"],
                    "made_mib": given[3]["made_mib"], "making_ms": given[3]["making_ms"]})
    return out


def rounds_summary(rounds):
    given = sum(r["out_bytes"] for r in rounds)
    reads = [r["read_ms"] for r in rounds]
    outs = [r["out_ms"] for r in rounds]
    making = [r["making_ms"] for r in rounds if r["making_ms"] is not None]
    return {"rounds": len(rounds),
            "ms_per_gib": (sum(r["took_ms"] for r in rounds) / (given / GIB)) if given else None,
            "median_read_ms": statistics.median(reads) if reads else None,
            "median_out_ms": statistics.median(outs) if outs else None,
            "median_making_ms": statistics.median(making) if making else None}


def bound_s(sw, out_gbs, in_gbs, both_gbs):
    o, i = sw["out_bytes"], sw["in_bytes"]
    if o and i:
        return max(o, i) / (both_gbs * 1e9)
    return max(o / (out_gbs * 1e9), i / (in_gbs * 1e9))


def report(sws, out_gbs, in_gbs, both_gbs):
    rows = []
    for s in sws:
        b = bound_s(s, out_gbs, in_gbs, both_gbs)
        rows.append(dict(s, bound_s=b, ratio=s["took_s"] / b if b > 0 else None,
                         s_per_gib=s["took_s"] / (max(s["out_bytes"], s["in_bytes"]) / GIB)))
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    summary = {"switches": len(rows),
               "median_ratio": statistics.median(ratios) if ratios else None}
    # The first switch against later ones of about its size (within 2x of
    # the median moved): a start's small swap-ins are no such switch.
    moved = [max(r["out_bytes"], r["in_bytes"]) for r in rows]
    if moved:
        med = statistics.median(moved)
        alike = [r for r, m in zip(rows, moved) if med / 2 <= m <= med * 2]
        if len(alike) >= 2:
            later = statistics.median(r["s_per_gib"] for r in alike[1:])
            summary["first_s_per_gib"] = alike[0]["s_per_gib"]
            summary["later_s_per_gib"] = later
            summary["first_vs_later"] = alike[0]["s_per_gib"] / later if later > 0 else None
    return rows, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out-gbs", type=float, default=55.0)
    ap.add_argument("--in-gbs", type=float, default=55.0)
    ap.add_argument("--both-gbs", type=float, default=50.0)
    ap.add_argument("--min-gib", type=float, default=1.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    evs = events(log_lines(a.files))
    rows, summary = report(switches(evs, int(a.min_gib * GIB)), a.out_gbs, a.in_gbs,
                           a.both_gbs)
    rounds = room_rounds(evs)
    if a.json:
        print(json.dumps({"switches": rows, "summary": summary, "room_rounds": rounds,
                          "rounds_summary": rounds_summary(rounds)}, indent=1))
        return 0
    print(f"{'at':>10} {'from':>7} {'to':>7} {'took s':>7} {'GiB out':>8} {'GiB in':>7} "
          f"{'bound s':>8} {'ratio':>6} {'room wait ms':>13}")
    for r in rows:
        rel = "-" if r["releaser"] is None else str(r["releaser"])
        print(f"{r['t']:10.3f} {rel:>7} {r['holder']:7d} {r['took_s']:7.3f} "
              f"{r['out_bytes'] / GIB:8.2f} {r['in_bytes'] / GIB:7.2f} {r['bound_s']:8.3f} "
              f"{r['ratio']:6.2f} {r['wait_ms']:13d}")
    med = summary["median_ratio"]
    print(f"{summary['switches']} switches; median took/bound "
          f"{'-' if med is None else f'{med:.2f}'} (target {TARGET_RATIO})", end="")
    if summary.get("first_vs_later") is not None:
        print(f"; first switch of its size {summary['first_s_per_gib']:.4f} s/GiB against "
              f"{summary['later_s_per_gib']:.4f} for the later ones' median: "
              f"{summary['first_vs_later']:.2f}x (target {TARGET_FIRST})")
    else:
        print()
    if rounds:
        print(f"{'asked at':>10} {'holder':>7} {'giver':>7} {'took ms':>8} {'read ms':>8} "
              f"{'out ms':>7} {'GiB out':>8} {'making ms':>10}")
        for r in rounds:
            making = "-" if r["making_ms"] is None else str(r["making_ms"])
            print(f"{r['t']:10.3f} {r['holder']:7d} {r['giver']:7d} {r['took_ms']:8.1f} "
                  f"{r['read_ms']:8.1f} {r['out_ms']:7d} {r['out_bytes'] / GIB:8.2f} "
                  f"{making:>10}")
        rs = rounds_summary(rounds)

        def f1(x):
            return "-" if x is None else f"{x:.1f}"
        print(f"{rs['rounds']} room rounds; {f1(rs['ms_per_gib'])} ms per GiB given; medians: "
              f"read {f1(rs['median_read_ms'])} ms, swap-out {f1(rs['median_out_ms'])} ms, "
              f"of it making host memory {f1(rs['median_making_ms'])} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
