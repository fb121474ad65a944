#!/usr/bin/env python3
"""Sweep bench (issue 44, item 6): where nvshare stands in every cell of
workload shapes, each cell compared in one run with plain CUDA (where the
processes fit the card together), sequential, whole-job serialization and
the overlapped bound. The machinery is oversub_bench.py's (configurations,
daemons, jobs, the bound, safety, time limits): see there.

A cell is a size, an allocation style, a GPU burst and a pause, named
SIZE-STYLE-bBURST-pPAUSE (e.g. equal-caching-b0.5-p1):
  sizes   equal    two processes of 0.575 x the card (1.15 x together)
          unequal  two of 2:1, 0.767 + 0.383 x the card (1.15 x together)
          triple   three of 0.417 x the card (1.25 x together)
          over     one process of 1.10 x the card (larger than the card:
                   NVSHARE_ENABLE_SINGLE_OVERSUB=1 under nvshare, where
                   sequential runs too, as nothing else runs it) beside one
                   of 0.15 x (1.25 x together)
  styles  torch_job.py --alloc-style: caching (PyTorch's caching allocator),
          one-block (one cudaMalloc of the whole working set, as JAX's
          preallocation), small (2048 allocations of 1 MiB, each its own
          cudaMalloc, then 1 GiB ones), growing (allocates a share a step)
  bursts  seconds of GPU work a step: 0.01, 0.1, 0.5, 3 (each process the
          same; shorter than a pass over its working set: the step touches
          only part of it, torch_job.py --touch-mib)
  pauses  seconds of busy CPU between steps: 0, 0.25, 1, 2
The sweep: every size x burst x pause with the caching style, and every
size x style at a burst of 0.5 s and a pause of 1 s (76 cells); --full-cross
every size x style x burst x pause (256). Steps a job: --step-seconds (12) /
(burst + pause), at least 8 and at most 200 (--quick: 2 to 4).

Each cell runs plain (only where it fits), sequential, serialized and nvshare
(and before, with --lib-before or --nvshared-before), as oversub_bench.py
does, and the bounds from sequential's figures of each job (simulate_bound; a
switch moves the excess, at most the smallest process, each way; a job of more
than 24 steps, 8 beside two others, has its steps joined in groups, the GPU
held through the pauses inside a group: approximate). A row a cell: nvshare /
min(sequential, serialized) and nvshare / overlapped bound. The target (issue
44): every cell within 1.03 x the better of sequential and serialization, the
median cell within 1.2 x the overlapped bound.

Safety: a cell whose processes together exceed the card + half the host's
RAM, or --max-oversub (1.3) x the card, is refused (and so is one whose
process does not fit the card alone, but for the size `over`); every job has
a time limit (the larger of --job-timeout and 3 x the cell's estimated time
alone) and --die-with-parent; an error, SIGINT or SIGTERM kills the jobs
and daemons. --max-minutes N: no cell starts after N minutes; the ones not
run are listed. --dry-run: every cell with its sizes, an estimate of its
time and the commands it would run, from --card-gib and --host-gib, without
a GPU. --quick: a card of 4 GiB emulated with nvshared --capacity, 2 to 4
steps. --out: the figures as JSON, written after each cell.
"""
import argparse
import fnmatch
import math
import os
import shlex
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oversub_bench import (MIB, REPEATED, OversubBench, add_run_args, check_run_args,  # noqa: E402
                           fmt, host_mem_mib, ratio, warm_host)
from policy_bench import BenchError, finish, run_scenarios  # noqa: E402
import switch_report  # noqa: E402
from torch_job import STYLES  # noqa: E402

SIZES = {"equal": (0.575, 0.575), "unequal": (1.15 * 2 / 3, 1.15 / 3),
         "triple": (1.25 / 3,) * 3, "over": (1.10, 0.15)}
BURSTS = (0.01, 0.1, 0.5, 3.0)
PAUSES = (0.0, 0.25, 1.0, 2.0)
BASE = (0.5, 1.0)           # burst, pause of the style cells
QUICK_CARD_MIB = 4096       # --quick: the card nvshared --capacity emulates
NOISE = 0.03                # a cell is within if nvshare <= (1 + NOISE) x the better
OVL_TARGET = 1.2            # the median cell's nvshare / overlapped bound
CONFIG_S = 3.0              # a configuration's own cost: daemon, waits (estimate)
MOST_BURSTS = {1: 24, 2: 24, 3: 8}  # per job in the bound (simulate_bound: 0.2 s, 4 s)


def cell_name(size, style, burst, pause):
    return f"{size}-{style}-b{burst:g}-p{pause:g}"


def make_cells(full_cross=False):
    """The cells, in the order they run: [{name, size, style, burst, pause}]."""
    out, seen = [], set()

    def add(size, style, burst, pause):
        name = cell_name(size, style, burst, pause)
        if name not in seen:
            seen.add(name)
            out.append(dict(name=name, size=size, style=style, burst=burst, pause=pause))
    for size in SIZES:
        for style in (STYLES if full_cross else STYLES[:1]):
            for burst in BURSTS:
                for pause in PAUSES:
                    add(size, style, burst, pause)
        for style in STYLES:
            add(size, style, *BASE)
    return out


def select(cells, patterns):
    """The cells whose names match one of the shell patterns (all if none);
    a pattern that matches no cell is an error."""
    if not patterns:
        return list(cells)
    for p in patterns:
        if not any(fnmatch.fnmatchcase(c["name"], p) for c in cells):
            raise ValueError(f"--only {p}: no such cell")
    return [c for c in cells if any(fnmatch.fnmatchcase(c["name"], p) for p in patterns)]


def plan_cell(cell, card_mib, quick, ms_per_gib, ctx_mib, step_s=12.0, timeout_s=300.0,
              repeats=1):
    """What a cell runs, from the card (MiB), one pass's time over 1 GiB and
    a context's size: working sets, each job's torch_job.py arguments, the
    capacity nvshared emulates, the excess a switch moves, whether the
    processes fit the card together (plain runs) and an estimate of time."""
    eff = QUICK_CARD_MIB if quick else card_mib
    ctx = 0 if quick else ctx_mib  # where --capacity emulates the card, contexts count nothing
    ws = [int(f * eff) for f in SIZES[cell["size"]]]
    burst, pause = cell["burst"], cell["pause"]
    lo, hi = (2, 4) if quick else (8, 200)
    steps = min(hi, max(lo, math.ceil(step_s / (burst + pause))))
    jobs, alone = [], []
    for w in ws:
        pass_s = ms_per_gib * w / 1024 / 1000
        passes, touch = max(1, round(burst / pass_s)), 0
        if burst < pass_s:  # a step shorter than a pass touches part of the memory
            passes, touch = 1, max(1, int(burst * 1000 / ms_per_gib * 1024))
        jobs.append(["--ws-mib", w, "--passes", passes, "--steps", steps, "--cpu-s", pause,
                     "--alloc-style", cell["style"]] + (["--touch-mib", touch] if touch else []))
        # start-up and context, fill and check, the steps
        alone.append(6.0 + 0.1 * w / 1024 + steps * burst + (steps - 1) * pause)
    total = sum(ws) + len(ws) * ctx
    excess = min(max(0, total - eff), min(ws))
    fits = total + (len(ws) * ctx_mib if quick else 0) <= card_mib
    reps = 1 + 2 * repeats  # sequential, serialized and nvshare (those two --torch-repeats)
    est = (max(alone) if fits else 0) + reps * sum(alone) + (reps + fits) * CONFIG_S
    return {"ws_mib": ws, "eff_card_mib": eff, "context_mib": ctx, "steps": steps,
            "jobs": jobs, "capacity_args": ["--capacity", f"{eff}M"] if quick else [],
            "excess_mib": excess, "fits": fits, "single_oversub": max(ws) + ctx > eff,
            "alone_est_s": alone, "est_s": est,
            "job_timeout_s": max(timeout_s, 3 * sum(alone))}


def refusal(cell, plan, card_mib, host_mib, max_oversub):
    """Why the cell may not run (None: it may): its processes together over
    the card + half the host's RAM or max_oversub x the card; one process
    that does not fit the card alone but in the size `over`."""
    total, eff = sum(plan["ws_mib"]), plan["eff_card_mib"]
    if total > card_mib + host_mib // 2:
        return (f"{total} MiB together is over the card's {card_mib} MiB + half the host's "
                f"{host_mib} MiB")
    if total > max_oversub * eff:
        return f"{total} MiB together is over {max_oversub:g} x the card's {eff} MiB"
    if cell["size"] != "over" and max(plan["ws_mib"]) + 1024 > eff:
        return f"a process of {max(plan['ws_mib'])} MiB does not fit the card's {eff} MiB alone"
    return None


def judge(rows, noise=NOISE, ovl_target=OVL_TARGET):
    """The target over the cells run: rows [{name, nvshare_s, sequential_s,
    serialized_s, overlapped_s, nvshare_ran}] (None where not measured). A
    cell is judged where nvshare ran and failed (not within), or where it and
    sequential or serialized completed; within where
    nvshare <= (1 + noise) x the better of them. The median of nvshare /
    overlapped bound over the cells that have both must be <= ovl_target."""
    within, slow, failed, unjudged, vs_ovl = [], [], [], [], []
    for r in rows:
        best = min([x for x in (r.get("sequential_s"), r.get("serialized_s")) if x],
                   default=None)
        nv = r.get("nvshare_s")
        if nv is None and r.get("nvshare_ran"):
            failed.append(r["name"])
            continue
        if nv is None or best is None:
            unjudged.append(r["name"])
            continue
        (within if nv <= (1 + noise) * best else slow).append(r["name"])
        if r.get("overlapped_s"):
            vs_ovl.append(nv / r["overlapped_s"])
    median = statistics.median(vs_ovl) if vs_ovl else None
    ovl_met = median is not None and median <= ovl_target
    return {"judged": len(within) + len(slow) + len(failed), "within": within, "slower": slow,
            "failed": failed, "not_judged": unjudged, "median_vs_overlapped": median,
            "median_met": ovl_met, "met": bool(within) and not slow and not failed and ovl_met}


def summary_line(s, not_run):
    return (f"summary: {len(s['within'])} of {s['judged']} cells within the target (nvshare <= "
            f"{1 + NOISE:.2f} x min(sequential, serialized))"
            + (f"; slower: {', '.join(s['slower'])}" if s["slower"] else "")
            + (f"; nvshare failed: {', '.join(s['failed'])}" if s["failed"] else "")
            + f"; median nvshare / overlapped bound {fmt(s['median_vs_overlapped'], '.3f')} "
              f"(target <= {OVL_TARGET}): {'met' if s['median_met'] else 'NOT met'}"
            + (f"; not judged: {', '.join(s['not_judged'])}" if s["not_judged"] else "")
            + (f"; not run: {', '.join(not_run)}" if not_run else "")
            + f". Target {'met' if s['met'] else 'NOT met'}.")


class SweepBench(OversubBench):
    """oversub_bench's runs, a cell at a time: a larger-than-the-card
    process runs under nvshare with NVSHARE_ENABLE_SINGLE_OVERSUB=1, in
    sequential too."""

    def __init__(self, a, p):
        super().__init__(a, p)
        self.plan = None
        self.rates = {}

    def config_args(self, cfg, extra=()):
        if cfg == "sequential" and self.plan and self.plan["single_oversub"]:
            return list(extra)
        return super().config_args(cfg, extra)

    def config_env(self, cfg):
        env = OversubBench.config_env(cfg)
        if cfg != "plain" and self.plan and self.plan["single_oversub"]:
            env["NVSHARE_ENABLE_SINGLE_OVERSUB"] = "1"
        if cfg in SWITCH_CONFIGS and getattr(self.a, "switches", False):
            env["NVSHARE_DEBUG"] = "1"  # switch_report reads the log
        return env

    def run_config(self, cfg, jobs, extra_args=()):
        row = super().run_config(cfg, jobs, extra_args)
        print(f"  {phases_line(cfg, row.get('jobs') or [])}", flush=True)
        if cfg in SWITCH_CONFIGS and getattr(self.a, "switches", False):
            row["switches"] = switch_figures([j.get("err_path") for j in row["jobs"]],
                                             self.rates)
            print(f"  {switches_line(cfg, row['switches'])}", flush=True)
        return row

    def job_argv(self, args):
        return [self.a.python, self.a.torch_job] + [str(x) for x in args]

    def run_cell(self, cell, plan):
        self.plan = plan
        self.a.job_timeout = plan["job_timeout_s"]
        n = len(plan["ws_mib"])
        switch, switch_ovl, rates = self.switch_costs(plan["excess_mib"] * MIB)
        self.rates = rates
        row = dict(cell, processes=n, ratio=round(sum(plan["ws_mib"]) / plan["eff_card_mib"], 3),
                   card_mib=self.card_mib(), capacity_mib=plan["eff_card_mib"] if
                   plan["capacity_args"] else None, gpu_step_s_est=cell["burst"], cpu_s=cell["pause"],
                   switch_s=switch, switch_overlapped_s=switch_ovl, rates=rates, configs={},
                   **{k: plan[k] for k in ("ws_mib", "steps", "excess_mib", "context_mib",
                                           "fits", "single_oversub", "est_s")})
        self.results["scenarios"][cell["name"]] = row
        print(f"{cell['name']}: {' + '.join(str(w) for w in plan['ws_mib'])} MiB "
              f"({row['ratio']} x {plan['eff_card_mib']} MiB), {plan['steps']} steps of "
              f"{cell['burst']:g} s GPU + {cell['pause']:g} s CPU, a switch moves "
              f"{plan['excess_mib'] / 1024:.2f} GiB each way", flush=True)
        jobs = [self.job_argv(j) for j in plan["jobs"]]
        for cfg in self.configs():
            if cfg == "plain" and not plan["fits"]:
                row["plain_skipped"] = "the processes do not fit the card together"
                continue
            reps = self.a.torch_repeats if cfg in REPEATED else 1
            row["configs"][cfg] = self.run_repeated(cfg, jobs, reps, plan["capacity_args"])
            self.write()
        runs = row["configs"].get("sequential", {}).get("runs", [])
        seq = [j for j in (runs[0].get("jobs", []) if runs else []) if j.get("error") is None]
        if len(seq) == n:  # coarsened where the bound would take minutes
            most = MOST_BURSTS[min(n, 3)]
            row["bound"] = self.bound_from(seq, n, switch, "torch", True, most)
            row["bound_overlapped"] = self.bound_from(seq, n, switch_ovl, "torch", True, most)
        self.finish_row(row, cell["name"])
        c = row["configs"]
        row.update(judge_row(cell["name"], c, row))


# The configurations whose runs --switches times: the library and, in an
# A/B, the one before it.
SWITCH_CONFIGS = ("nvshare", "before")


def switch_figures(err_paths, rates):
    """switch_report's summary of one run's switches, from its processes'
    debug logs, at the rates the cell's bound uses (switch_costs: measured,
    or --swap-gbs or its assumed rate)."""
    lines = switch_report.log_lines(p for p in err_paths if p and os.path.exists(p))
    evs = switch_report.events(lines)
    sws = switch_report.switches(evs, switch_report.GIB)
    rows, summary = switch_report.report(sws, rates["out_gbs"], rates["in_gbs"],
                                         rates["both_gbs_each_way"])
    rounds = switch_report.rounds_summary(switch_report.room_rounds(evs))
    return dict(summary, took_s=[round(r["took_s"], 3) for r in rows], room_rounds=rounds)


def switches_line(name, sw):
    """One line of a cell's switches against issue 44's targets."""
    med, first = sw.get("median_ratio"), sw.get("first_vs_later")
    rr = sw.get("room_rounds") or {}
    return (f"{name}: {sw.get('switches', 0)} switches, median took/bound {fmt(med)} "
            f"(target {switch_report.TARGET_RATIO}), first of its size / later {fmt(first)} "
            f"(target {switch_report.TARGET_FIRST}); {rr.get('rounds', 0)} room rounds, "
            f"{fmt(rr.get('ms_per_gib'), '.1f')} ms per GiB given, medians: read "
            f"{fmt(rr.get('median_read_ms'), '.1f')} ms, swap-out "
            f"{fmt(rr.get('median_out_ms'), '.1f')} ms, of it making host memory "
            f"{fmt(rr.get('median_making_ms'), '.1f')} ms")


def phases_line(name, jobs):
    """Where each job's time went, in seconds (torch_job.py's figures): its
    start (up to its first allocation), its fill (with the waits for the GPU
    of a job that waits its turn), its steps (and the longest), its check of
    the data, and its exit (from its last output to its end)."""
    parts = []
    for j in jobs:
        steps = j.get("steps") or []
        if not steps or j.get("total_s") is None:
            parts.append(f"pid {j.get('pid')}: no figures")
            continue
        exit_s = j["wall_s"] - j["total_s"] if j.get("wall_s") is not None else None
        parts.append(f"{fmt(j.get('startup_s'), '.2f')} / {fmt(j.get('fill_s'), '.2f')} / "
                     f"{sum(steps):.2f} (longest {max(steps):.2f}) / "
                     f"{fmt(j.get('verify_s'), '.2f')} / {fmt(exit_s, '.2f')}")
    return f"{name}: each job's start / fill / steps / check / exit, s: " + "; ".join(parts)


def judge_row(name, c, row):
    """The figures judge() takes, from a cell's configurations."""
    wall = {k: c.get(k, {}).get("wall_s") for k in ("plain", "sequential", "serialized",
                                                     "nvshare")}
    best = min([x for x in (wall["sequential"], wall["serialized"]) if x], default=None)
    ovl = (row.get("bound_overlapped") or {}).get("bound_s")
    return {"name": name, "nvshare_ran": "nvshare" in c, "plain_s": wall["plain"], "sequential_s": wall["sequential"],
            "serialized_s": wall["serialized"], "nvshare_s": wall["nvshare"],
            "overlapped_s": ovl, "nvshare_vs_best": ratio(wall["nvshare"], best),
            "nvshare_vs_overlapped": ratio(wall["nvshare"], ovl)}


def print_sweep(cells, res):
    print(f"\n{'cell':28} {'GiB each':>15} {'steps':>5} {'plain':>7} {'seq':>7} {'serial':>7} "
          f"{'nvshare':>7} {'ovl':>7} {'nv/best':>7} {'nv/ovl':>6}  verdict")
    rows = []
    for cell in cells:
        r = res.get(cell["name"], {})
        gib = "+".join(f"{w / 1024:.1f}" for w in r.get("ws_mib", []))
        why = r.get("refused") or r.get("not_run") or r.get("error")
        if why or "nvshare_vs_best" not in r:
            print(f"{cell['name']:28} {gib:>15} {'':5} {why or 'no figures'}")
            continue
        rows.append(r)
        vb = r["nvshare_vs_best"]
        verdict = "-" if vb is None else "ok" if vb <= 1 + NOISE else "SLOWER"
        print(f"{cell['name']:28} {gib:>15} {r['steps']:5} {fmt(r['plain_s']):>7} "
              f"{fmt(r['sequential_s']):>7} {fmt(r['serialized_s']):>7} {fmt(r['nvshare_s']):>7} "
              f"{fmt(r['overlapped_s']):>7} {fmt(vb, '.3f'):>7} "
              f"{fmt(r['nvshare_vs_overlapped']):>6}  {verdict}")
    return rows


def dry_run(a, b, cells, card, host):
    """Prints every cell with its sizes, estimate and commands."""
    total = 0.0
    ctx = int(a.assume_context_mib)
    print(f"dry run: card {card} MiB, host {host} MiB; assumed: a pass over 1 GiB "
          f"{a.assume_ms_per_gib} ms, a context {ctx} MiB; nvshared runs on a temporary "
          f"socket with --no-bus, an empty --config and --state-dir")
    for cell in cells:
        plan = plan_cell(cell, card, a.quick, a.assume_ms_per_gib, ctx, a.step_seconds,
                         a.job_timeout, a.torch_repeats)
        why = refusal(cell, plan, card, host, a.max_oversub)
        late = a.max_minutes and total > a.max_minutes * 60
        total += 0 if why else plan["est_s"]
        print(f"\n{cell['name']}: {' + '.join(str(w) for w in plan['ws_mib'])} MiB "
              f"(card {plan['eff_card_mib']} MiB), {plan['steps']} steps, excess "
              f"{plan['excess_mib']} MiB, ~{plan['est_s'] / 60:.1f} min, job limit "
              f"{plan['job_timeout_s']:.0f} s" + (f"; REFUSED: {why}" if why else "")
              + ("; past --max-minutes by the estimate: not started" if late else ""))
        if why:
            continue
        b.plan = plan
        for j in plan["jobs"]:
            print(f"  job: {shlex.join(b.job_argv(j) + ['--die-with-parent'])}")
        for cfg in b.configs():
            if cfg == "plain" and not plan["fits"]:
                print("  plain: not run (does not fit the card)")
                continue
            d = b.config_args(cfg, plan["capacity_args"])
            env = b.config_env(cfg)
            if d is not None:
                env = dict(env, LD_PRELOAD=a.lib_before if cfg == "before" and a.lib_before
                           else a.lib,
                           NVSHARE_SOCKET="SOCK")
            how = "one after the other" if cfg == "sequential" else "at once"
            daemon = a.nvshared_before if cfg == "before" and a.nvshared_before else a.nvshared
            print(f"  {cfg}: jobs {how}" + (f", env {' '.join(f'{k}={v}' for k, v in env.items())}"
                                            if env else "")
                  + ("" if d is None else f"; {shlex.join([daemon, '--socket', 'SOCK'] + d)}"))
    print(f"\n{len(cells)} cells, estimated {total / 60:.0f} GPU minutes in all "
          f"(plus ~1 min for torch_job.py --info)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    add_run_args(ap, "sweep_bench.json", os.path.join(root, "build-gpu"))
    ap.add_argument("--only", "--cells", action="append", default=[], metavar="PATTERNS",
                    help="cells whose names match these shell patterns, comma-separated "
                         "(repeatable; default: all)")
    ap.add_argument("--full-cross", action="store_true",
                    help="every size x style x burst x pause")
    ap.add_argument("--list", action="store_true", help="print the cells' names and end")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 2 to 4 steps")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="start no cell after this many minutes (0: no limit)")
    ap.add_argument("--max-oversub", type=float, default=1.3,
                    help="refuse cells whose processes together exceed this x the card")
    ap.add_argument("--step-seconds", type=float, default=12.0,
                    help="steps a job: this / (burst + pause), within 8..200")
    ap.add_argument("--switches", action="store_true",
                    help="nvshare (and before) with NVSHARE_DEBUG=1; each run's switches timed "
                         "from its log (switch_report.py) against the cell's measured rates")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the cells and their commands; run nothing")
    ap.add_argument("--host-gib", type=float, help="the host's RAM (default: MemTotal)")
    ap.add_argument("--assume-ms-per-gib", type=float, default=1.1,
                    help="--dry-run: one pass over 1 GiB (measured otherwise)")
    ap.add_argument("--assume-context-mib", type=float, default=520,
                    help="--dry-run: a process's context (measured otherwise)")
    a = ap.parse_args()
    try:
        cells = select(make_cells(a.full_cross),
                       [p.strip() for x in a.only for p in x.split(",") if p.strip()])
    except ValueError as e:
        ap.error(str(e))
    if a.list:
        print("\n".join(c["name"] for c in cells))
        return 0
    if a.dry_run:
        if not a.card_gib or not a.host_gib:
            ap.error("--dry-run needs --card-gib and --host-gib")
    else:
        check_run_args(ap, a)
    host = int(a.host_gib * 1024) if a.host_gib else host_mem_mib()
    if a.warm_host_gib > 0 and not a.dry_run:
        warm_host(a.warm_host_gib)
    b = SweepBench(a, {"step_seconds": a.step_seconds, "max_oversub": a.max_oversub})
    if a.dry_run:
        dry_run(a, b, cells, int(a.card_gib * 1024), host)
        shutil.rmtree(b.wd, ignore_errors=True)
        return 0
    res, t0, timeout = b.results["scenarios"], time.monotonic(), a.job_timeout
    b.results["setup"].update(cells=[c["name"] for c in cells], max_minutes=a.max_minutes)
    by_name = {c["name"]: c for c in cells}

    def method(name):
        def go():
            cell = by_name[name]
            if a.max_minutes and time.monotonic() - t0 > a.max_minutes * 60:
                res[name] = {"not_run": f"not run: --max-minutes {a.max_minutes:g} spent"}
                return
            info = b.torch_info()
            card = b.card_mib()
            ctx = (info["total_bytes"] - info["free_bytes"]) // MIB
            plan = plan_cell(cell, card, a.quick, info["ms_per_gib_pass"], ctx,
                             a.step_seconds, timeout, a.torch_repeats)
            why = refusal(cell, plan, card, host, a.max_oversub)
            if why:
                res[name] = {"refused": f"refused: {why}", "ws_mib": plan["ws_mib"]}
                print(f"{name}: refused: {why}", flush=True)
                return
            b.run_cell(cell, plan)
        return go
    failed, t_start = run_scenarios(b, [c["name"] for c in cells], method,
                                    "" if a.nvsharectl else "; no --nvsharectl: no swap figures")
    print("\n===== sweep_bench summary =====")
    rows = print_sweep(cells, res)
    not_run = [c["name"] for c in cells if "not_run" in res.get(c["name"], {})]
    s = judge(rows)
    b.results["summary"] = dict(s, not_run=not_run)
    b.write()
    print(summary_line(s, not_run))
    if a.switches:
        for cell, cfg in ((c, cfg) for c in cells for cfg in SWITCH_CONFIGS):
            runs = res.get(cell["name"], {}).get("configs", {}).get(cfg, {}).get("runs", [])
            for run in runs:
                if "switches" in run:
                    print(switches_line(f"{cell['name']} {cfg}", run["switches"]))
    return finish(b, failed, t_start)


if __name__ == "__main__":
    sys.exit(main())
