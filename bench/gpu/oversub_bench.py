#!/usr/bin/env python3
"""Oversubscription benchmark (issue 13): processes whose GPU memory together
exceeds the card, the case nvshare exists for.

Configurations, run one after the other in one session for each scenario:

  plain       the jobs at once, no nvshare (real oversubscription: some of
              them run out of memory; recorded as failed, with the reason)
  sequential  the jobs one after the other, no nvshare
  serialized  libnvshare.so + nvshared --anti-thrashing on --time-quantum
              600s, jobs with NVSHARE_IDLE_RELEASE_MS=0 (no early release):
              whole-job serialization, as the original nvshare did
  nvshare     libnvshare.so + nvshared with its defaults (auto mode)
  before      with --lib-before LIB and/or --nvshared-before NVSHARED: as nvshare,
              with that library and/or daemon instead
              (another build, compared in the same run)

nvshared runs per configuration on a temporary socket (--no-bus, an empty
config file, a temporary state directory), as in policy_bench.py.

Scenarios (--only picks some):
  torch-pair    two PyTorch processes (torch_job.py) whose working sets
                together are --ratio (1.15) x the card's memory, each --steps
                (8) steps of ~--gpu-s (0.5) s GPU work over its whole working
                set and --cpu-s (1.0) s of busy CPU; each checks its data
  torch-triple  the same with three processes at --ratio3 (1.25)
  torch-unequal two PyTorch processes of working sets 2:1, together
                --ratio-unequal (1.06) x the card, the same steps and passes
                (the smaller one's GPU work is half as long); no bound (the
                bound takes equal jobs): nvshare against sequential, the
                longer job alone (in sequential) and --lib-before
  emulated      two share_job processes of 16 GiB, 6 bursts of ~2 s GPU and
                2 s busy CPU, under nvshared --capacity 24G (oversubscription
                emulated: the card has room for both); serialized and nvshare
                --repeats (5) times: median, slowest, slowest/median
The card's memory: torch.cuda.mem_get_info() in a process without the
library (torch_job.py --info), or --card-gib.

The bound: what the measured rates allow. The rates: pinned copies of 4 GiB
on this card, in a process without the library (torch_job.py --info), device
to host alone, host to device alone, and both at once on two streams (the
bus gives less each way when both directions run); --swap-gbs R instead
takes R each way, alone and at once. Each job is what sequential
measured of it alone: a start-up (process start to its first GPU work; the
least of its runs, since one started right after another waits for the
driver to free that one's memory), then
bursts of GPU work (g, median of its steps; the fill joins the first, the
check the last) separated by CPU phases (c). The GPU runs one job at a time;
each change of the job on it moves the excess,
    max(0, sum of working sets + the processes' contexts - card)
out and as much in (a context: what torch.cuda.mem_get_info() shows taken
in a process that has allocated nothing; the card is nvshared's --capacity
where that emulates it, and contexts then count nothing), and costs
    switch_s = excess / out rate + excess / in rate
(one after the other). A second bound, "overlapped", charges each change
excess / (the rate each way with both at once): the copies out and in run
at once, so a switch costs the longer of them, as the swap engine means it
to; it is the one the engine's own switches are measured against (column
/ovl). The bound is the
shortest completion time of all the jobs over every order of their bursts
(a dynamic programme over the orders; start-up and CPU phases overlap
anything), plus each process's exit. Printed: each configuration / bound,
nvshare / sequential, nvshare / serialized.

Safety: a scenario whose processes together allocate more than the card's
memory + half the host's RAM (MemTotal) is refused, and so is one whose
single process does not fit the card alone; emulated jobs together stay
under --max-concurrent-gib (40). Every process has a time limit
(--job-timeout, 300 s) and is started with --die-with-parent; on an error,
SIGINT or SIGTERM the bench kills its jobs and daemons.

With --nvsharectl, a watcher polls `nvsharectl socket-status` in the nvshare
configurations: per pid the bytes swapped in (bytes_prefetched) and out
(bytes_evicted), swap-in and swap-out counts and times, grants; and the
daemon's per-user totals (usage) after the run.

Usage: oversub_bench.py --nvshared BIN --lib LIB --job SHARE_JOB
                        [--torch-job bench/gpu/torch_job.py] [--nvsharectl BIN]
                        [--only torch-pair,torch-triple,emulated] [--quick]
                        [--out oversub_bench.json] [--nvshared-arg ARG]...
                        [--env NAME=VALUE]... [--verbose] [--keep-workdir]
--quick: 2 GiB per torch process with --capacity emulation instead of real
oversubscription, 2 steps, emulated 1 GiB jobs, 1 repeat: about a minute.
Prints a table per scenario; writes every figure as JSON to --out after each
scenario. Exit status 1 if a scenario or a configuration under nvshare failed.
Needs Python >= 3.9.
"""
import argparse
import contextlib
import json
import mmap
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policy_bench import (Bench, BenchError, Stop, Watcher, finish, run_scenarios,  # noqa: E402
                          set_pdeathsig, tail)

SCENARIOS = ("torch-pair", "torch-triple", "torch-unequal", "emulated")
CONFIGS = ("plain", "sequential", "serialized", "nvshare")
ALL_CONFIGS = CONFIGS + ("before",)  # before: only with --lib-before or --nvshared-before
REPEATED = ("serialized", "nvshare", "before")  # run --repeats / --torch-repeats times
MIB = 1 << 20

FULL = dict(torch_ws_mib=0, steps=8, gpu_s=0.5, cpu_s=1.0,
            emu_ws_mib=16384, emu_capacity_mib=24576, emu_bursts=6, emu_gpu_s=2.0,
            emu_cpu_s=2.0, repeats=5)
# torch_ws_mib 0: from the card and the ratio; in --quick a fixed size with
# the capacity emulating the ratio.
QUICK = dict(torch_ws_mib=2048, steps=2, gpu_s=0.3, cpu_s=0.3,
             emu_ws_mib=1024, emu_capacity_mib=1536, emu_bursts=2, emu_gpu_s=0.3,
             emu_cpu_s=0.3, repeats=1)


def simulate_bound(jobs, switch_s, cap=256):
    """The shortest completion time of jobs sharing one GPU, one at a time,
    over every order of their bursts. jobs: [(start_s, [(gpu_s, cpu_after_s),
    ...]), ...]: a job's first burst can start at start_s, each next one
    cpu_after_s after the previous ended. Each change of the job on the GPU
    costs switch_s (the first grant nothing). Dynamic programme over
    (bursts done per job, last job), keeping the Pareto front of (GPU free,
    each job's ready time, finish); a front over cap is cut to its cap best
    (then `exact` is False). Returns (seconds, exact)."""
    n = len(jobs)
    lens = tuple(len(b) for _, b in jobs)
    layer = {((0,) * n, -1): [(0.0, tuple(float(s) for s, _ in jobs), 0.0)]}
    exact = True
    for _ in range(sum(lens)):
        nxt = {}
        for (counts, last), front in layer.items():
            for j in range(n):
                k = counts[j]
                if k == lens[j]:
                    continue
                g, c = jobs[j][1][k]
                sw = switch_s if last not in (-1, j) else 0.0
                done = k + 1 == lens[j]
                lst = nxt.setdefault((counts[:j] + (k + 1,) + counts[j + 1:], j), [])
                for free, ready, fin in front:
                    end = max(ready[j], free + sw) + g
                    r = ready[:j] + ((0.0 if done else end + c),) + ready[j + 1:]
                    lst.append((end, r, max(fin, end) if done else fin))
        layer = {}
        for key, lst in nxt.items():
            lst.sort(key=lambda s: s[0] + sum(s[1]) + s[2])
            kept = []
            for s in lst:
                v = (s[0],) + s[1] + (s[2],)
                if not any(all(x <= y for x, y in zip(kv, v)) for kv in kept):
                    kept.append(v)
            if len(kept) > cap:
                exact = False
                kept = kept[:cap]
            layer[key] = [(v[0], tuple(v[1:-1]), v[-1]) for v in kept]
    return min(fin for front in layer.values() for _, _, fin in front), exact


def job_model(seq_jobs, kind):
    """A job as sequential measured it (medians over seq_jobs, runs of the
    same job): its start-up and its bursts [(gpu_s, cpu_after_s), ...]."""
    if kind == "torch":
        gpu = [g for j in seq_jobs for g in j["gpu_s"]]
        cpu = [s - g for j in seq_jobs for s, g in zip(j["steps"][:-1], j["gpu_s"][:-1])]
        g, c = med(gpu), med(cpu) if cpu else 0.0
        # The least: a job started right after another waits for the
        # driver to free the first one's memory (8.2 s against 4.1).
        start = min(j["startup_s"] for j in seq_jobs)
        fill = med([j["fill_s"] for j in seq_jobs])
        ver = med([j["verify_s"] for j in seq_jobs])
        k = len(seq_jobs[0]["steps"])
        bursts = [(g, c)] * k
        bursts[0] = (bursts[0][0] + fill, bursts[0][1])
        bursts[-1] = (bursts[-1][0] + ver, 0.0)
    else:
        g = med([b for j in seq_jobs for b in j["bursts_s"]])
        k = len(seq_jobs[0]["bursts_s"])
        c = seq_jobs[0]["cpu_s_param"]
        start = med([j["total_s"] - sum(j["bursts_s"]) - (k - 1) * c for j in seq_jobs])
        bursts = [(g, c)] * (k - 1) + [(g, 0.0)]
        ver = 0.0
    return {"startup_s": start, "bursts": bursts, "gpu_step_s": g, "cpu_step_s": c}


def coarsen(bursts, most):
    """bursts [(gpu_s, cpu_after_s), ...] as at most `most`: consecutive ones
    joined, the pauses inside a group counted as GPU time (the GPU held
    through them), so that simulate_bound stays quick; the bound is then
    approximate (no switch inside a group)."""
    k = -(-len(bursts) // most)
    return [(sum(g for g, _ in grp) + sum(c for _, c in grp[:-1]), grp[-1][1])
            for grp in (bursts[i:i + k] for i in range(0, len(bursts), k))]


def meminfo_kib(field):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise BenchError(f"no {field} in /proc/meminfo")


def host_mem_mib():
    return meminfo_kib("MemTotal") // 1024


def warm_host(gib):
    """Touches `gib` GiB of host memory once and frees it: on a freshly
    started VM the hypervisor backs each page at its first touch (pinning ran
    at 2 GB/s there, against 12-13 later), which would weigh on whichever
    configuration runs first."""
    n = int(gib * (1 << 30))
    if n > meminfo_kib("MemAvailable") * 1024 // 2:
        raise BenchError(f"--warm-host-gib {gib}: more than half the available host memory")
    t0 = time.time()
    block = b"\1" * (64 << 20)
    with mmap.mmap(-1, n) as m:
        for off in range(0, n, len(block)):
            m[off:off + len(block)] = block[:n - off]
    print(f"host memory warmed: {gib} GiB in {time.time() - t0:.1f} s", flush=True)


def med(xs):
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


class OversubBench(Bench):
    def __init__(self, a, p):
        a.on_quantum = a.serial_quantum  # Bench records it; `serialized` uses it
        super().__init__(a, p)
        shutil.rmtree(self.wd, ignore_errors=True)
        self.wd = tempfile.mkdtemp(prefix="oversub_bench.")
        os.chmod(self.wd, 0o755)
        self.conf = os.path.join(self.wd, "empty.conf")
        open(self.conf, "w").close()
        self.base_env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        self.info = None
        s = self.results["setup"]
        s.update(workdir=self.wd, host_mem_mib=host_mem_mib(), swap_gbs=a.swap_gbs,
                 job_timeout_s=a.job_timeout, serial_quantum=a.serial_quantum,
                 nvsharectl=a.nvsharectl)
        del s["on_quantum"]

    # --- processes -----------------------------------------------------------------

    def start_cmd(self, argv, sock, env=None, tag="job"):
        """argv (+ --die-with-parent), under nvshare when sock is given."""
        n = self.next_id()
        e = dict(self.base_env)
        if sock:
            lib = self.a.lib_before if tag == "before" and self.a.lib_before else self.a.lib
            e.update(LD_PRELOAD=lib, NVSHARE_SOCKET=sock)
        e.update(self.extra_env)
        e.update(env or {})
        argv = [str(x) for x in argv] + ["--die-with-parent"]
        out_path = os.path.join(self.wd, f"{tag}-{n}.out")
        err_path = os.path.join(self.wd, f"{tag}-{n}.err")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            p = subprocess.Popen(argv, env=e, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                 cwd=self.wd)
        p.out_path, p.err_path, p.tag, p.t0 = out_path, err_path, tag, time.monotonic()
        self.live.append(p)
        if self.a.verbose:
            extra = {k: v for k, v in (env or {}).items()}
            print(f"    started {tag} pid {p.pid}: {shlex.join(argv)}"
                  + (" (nvshare)" if sock else "") + (f" {extra}" if extra else ""), flush=True)
        return p

    def collect(self, procs):
        """Waits for the processes (each at most --job-timeout from its
        start; one over it is killed); their results: each one's last JSON
        line with total_s, plus rc, wall_s and error (None when it ran to the
        end and, for a torch job, verified its data)."""
        ends, timed_out = {}, set()
        while len(ends) < len(procs):
            now = time.monotonic()
            for p in procs:
                if p.pid in ends:
                    continue
                if p.poll() is not None:
                    ends[p.pid] = now
                elif now > p.t0 + self.a.job_timeout:
                    self.stop_job(p)
                    ends[p.pid] = now
                    timed_out.add(p.pid)
            time.sleep(0.01)
        return [self.result(p, ends[p.pid], p.pid in timed_out) for p in procs]

    def result(self, p, end, timed_out):
        if p in self.live:
            self.live.remove(p)
        r = {}
        with open(p.out_path, errors="replace") as f:
            lines = [x for x in f.read().splitlines() if x.startswith("{") and "total_s" in x]
        if lines:
            try:
                r = json.loads(lines[-1])
            except ValueError:
                pass
        r.update(pid=p.pid, rc=p.returncode, t_end=end, wall_s=end - p.t0, err_path=p.err_path)
        if timed_out:
            r["error"] = f"still running after --job-timeout {self.a.job_timeout:.0f} s; killed"
        elif p.returncode != 0 or not r.get("total_s"):
            r["error"] = r.get("error") or f"exited with {p.returncode}"
        else:
            r["error"] = None
        if r["error"] is not None:
            r["stderr"] = tail(p.err_path, 600)
        return r

    @contextlib.contextmanager
    def daemon(self, args, binary=None):
        """nvshared (`binary`, else --nvshared) with args on a fresh socket, a
        Watcher on it when --nvsharectl is given; yields (socket, watcher or
        None), or (None, None) when args is None (no nvshare)."""
        if args is None:
            yield None, None
            return
        n = self.next_id()
        sock = os.path.join(self.wd, f"nvshared-{n}.sock")
        log_path = os.path.join(self.wd, f"nvshared-{n}.log")
        cmd = [binary or self.a.nvshared, "--socket", sock, "--no-bus", "--config", self.conf,
               "--state-dir", os.path.join(self.wd, f"state-{n}")] + args + self.a.nvshared_arg
        if self.a.verbose:
            print(f"    nvshared: {shlex.join(cmd)}", flush=True)
        pre = set_pdeathsig if threading.active_count() == 1 else None
        with open(log_path, "w") as log:
            d = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, preexec_fn=pre)
        self.daemons.append(d)
        w = None
        try:
            deadline = time.monotonic() + 15
            while True:
                if d.poll() is not None:
                    raise BenchError(f"nvshared exited with {d.returncode}: {tail(log_path)}")
                if os.path.exists(sock):
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                        try:
                            s.connect(sock)
                            break
                        except OSError:
                            pass
                if time.monotonic() > deadline:
                    raise BenchError(f"nvshared not listening on {sock} after 15 s: "
                                     f"{tail(log_path)}")
                time.sleep(0.02)
            if self.a.nvsharectl:
                w = Watcher(self.a.nvsharectl, sock, self.base_env)
                w.query()
                w.start()
            yield sock, w
            if d.poll() is not None:
                raise BenchError(f"nvshared ended during the run ({d.returncode}): "
                                 f"{tail(log_path)}")
        finally:
            if w:
                w.stop()
            self.kill_jobs()
            self.end(d, grace=5)
            if d in self.daemons:
                self.daemons.remove(d)

    def configs(self):
        return [c for c in ALL_CONFIGS
                if (c != "before" or self.a.lib_before or self.a.nvshared_before)
                and (not self.a.configs or c in self.a.configs.split(","))]

    def config_args(self, cfg, extra=()):
        if cfg in ("plain", "sequential"):
            return None
        if cfg == "serialized":
            return ["--anti-thrashing", "on", "--time-quantum", self.a.serial_quantum] + list(extra)
        return list(extra)  # nvshare and before: the defaults

    @staticmethod
    def config_env(cfg):
        return {"NVSHARE_IDLE_RELEASE_MS": "0"} if cfg == "serialized" else {}

    # --- one run of a configuration ---------------------------------------------------

    def run_config(self, cfg, jobs, extra_args=()):
        """jobs: argument vectors. All at once, or one after the other for
        `sequential`. Wall time from the first start to the last end (of the
        jobs that completed), each job's result, the daemon's swap figures."""
        row = {}
        binary = self.a.nvshared_before if cfg == "before" else None
        with self.daemon(self.config_args(cfg, extra_args), binary) as (sock, w):
            env = self.config_env(cfg)
            t0 = time.monotonic()
            procs, outs = [], []
            if cfg == "sequential":
                for j in jobs:  # sock: None but where config_args gives a daemon
                    procs.append(self.start_cmd(j, sock, env, tag=cfg))
                    outs += self.collect(procs[-1:])
            else:
                procs = [self.start_cmd(j, sock, env, tag=cfg) for j in jobs]
                outs = self.collect(procs)
            ok = [o for o in outs if o["error"] is None]
            row["wall_s"] = (max(o["t_end"] for o in ok) - t0) if len(ok) == len(outs) else None
            if ok and len(ok) < len(outs):
                row["wall_completed_s"] = max(o["t_end"] for o in ok) - t0
            self.check_seen(w, procs, row, cfg)
            if w:
                row["swaps"] = self.swap_figures(w, procs)
        for o in outs:
            o.pop("t_end", None)
        row["jobs"] = outs
        row["failed"] = [{"pid": o["pid"], "rc": o["rc"], "error": o["error"]}
                         for o in outs if o["error"] is not None]
        return row

    @staticmethod
    def swap_figures(w, procs):
        """Per pid: the client's last status the watcher saw (it leaves the
        status when it exits, so the last change may be missed); and the
        daemon's per-user totals (usage, exited clients included)."""
        keys = ("swap_ins", "swap_outs", "bytes_prefetched", "bytes_evicted", "swap_in_us",
                "swap_out_us", "grants", "revocations", "held_us", "waited_us", "memory")
        per = {}
        for p in procs:
            h = w.history.get(p.pid)
            if h:
                per[str(p.pid)] = {k: h[-1].get(k) for k in keys}
        r = {"per_pid": per}
        try:
            doc = w.query()
            u = doc.get("usage", [])
            tot = {k: sum(x.get(k, 0) for x in u) for k in
                   ("bytes_swapped_in", "bytes_swapped_out", "swap_in_us", "swap_out_us",
                    "grants", "revocations")}
            r["usage"] = tot
            r["mode"] = doc.get("mode")
            r["capacity"] = [g.get("capacity") for g in doc.get("gpus", [])]
        except Exception as e:
            r["usage_error"] = str(e)
        ins = sum(v.get("swap_ins") or 0 for v in per.values())
        outs = sum(v.get("swap_outs") or 0 for v in per.values())
        r["swap_ins"], r["swap_outs"] = ins, outs
        bin_ = r.get("usage", {}).get("bytes_swapped_in")
        if bin_ is None:
            bin_ = sum(v.get("bytes_prefetched") or 0 for v in per.values())
        bout = r.get("usage", {}).get("bytes_swapped_out")
        if bout is None:
            bout = sum(v.get("bytes_evicted") or 0 for v in per.values())
        r["bytes_in"], r["bytes_out"] = bin_, bout
        r["gib_per_swap_in"] = bin_ / ins / 2 ** 30 if ins else None
        r["gib_per_swap_out"] = bout / outs / 2 ** 30 if outs else None
        return r

    def run_repeated(self, cfg, jobs, repeats, extra_args=()):
        runs = []
        for i in range(repeats):
            try:
                r = self.run_config(cfg, jobs, extra_args)
            except BenchError as e:
                r = {"error": str(e), "wall_s": None, "failed": []}
            runs.append(r)
            tag = f" (run {i + 1}/{repeats})" if repeats > 1 else ""
            if r["wall_s"] is not None:
                print(f"  {cfg}{tag}: {r['wall_s']:.2f} s", flush=True)
            else:
                why = r.get("error") or "; ".join(
                    f"pid {f['pid']}: {(f['error'] or '')[:160]}" for f in r["failed"])
                print(f"  {cfg}{tag}: FAILED: {why}", flush=True)
        walls = [r["wall_s"] for r in runs if r["wall_s"] is not None]
        row = {"runs": runs, "wall_s": med(walls), "slowest_s": max(walls) if walls else None,
               "completed_runs": len(walls)}
        row["slowest_over_median"] = ratio(row["slowest_s"], row["wall_s"])
        if cfg != "plain" and len(walls) < len(runs):
            self.failures += 1
        return row

    # --- the bound ----------------------------------------------------------------------

    @staticmethod
    def bound_from(seq_jobs, n, switch_s, kind, each=False, most=None):
        """Each of n jobs as sequential measured one (medians over its runs);
        each: seq_jobs are the n jobs, different ones, each as measured;
        most: each job's bursts coarsened to at most that many."""
        if not seq_jobs:
            return None
        models = ([job_model([j], kind) for j in seq_jobs] if each
                  else [job_model(seq_jobs, kind)] * n)
        # the process around the job's own clock: interpreter start, exit
        tail_s = med([j["wall_s"] - j["total_s"] for j in seq_jobs])
        joined = [m["bursts"] if not most or len(m["bursts"]) <= most
                  else coarsen(m["bursts"], most) for m in models]
        t, exact = simulate_bound([(m["startup_s"], b) for m, b in zip(models, joined)],
                                  switch_s)
        exact = exact and all(b is m["bursts"] for m, b in zip(models, joined))
        pick = (lambda k: [m[k] for m in models]) if each else (lambda k: models[0][k])
        return {"bound_s": t + tail_s, "exact": exact, "gpu_step_s": pick("gpu_step_s"),
                "cpu_step_s": pick("cpu_step_s"), "startup_s": pick("startup_s"),
                "outside_job_s": tail_s, "switch_s": switch_s,
                "alone_s": med([j["wall_s"] for j in seq_jobs])}

    def switch_costs(self, excess):
        """What a switch that moves `excess` bytes each way costs: one way
        after the other, and both at once; at the bus rates torch_job.py
        --info measured on this card in this run (--swap-gbs: that rate
        each way instead, and both at once taken as one way alone)."""
        bus, why = None, "--swap-gbs"
        if not self.a.swap_gbs:
            try:
                bus = self.torch_info().get("bus")
            except BenchError as e:  # no PyTorch: the emulated pair still runs
                why = f"not measured: {str(e)[-200:]}"
        if not bus:
            r = (self.a.swap_gbs or 45.0) * 1e9
            return 2 * excess / r, excess / r, {
                "measured": False, "out_gbs": r / 1e9, "in_gbs": r / 1e9,
                "both_gbs_each_way": r / 1e9,
                "text": f"{r / 1e9:.1f} GB/s each way, assumed ({why})"}
        out, into = bus["bytes"] / bus["out_s"], bus["bytes"] / bus["in_s"]
        both = bus["bytes"] / bus["both_s"]  # each way, while the other runs
        return excess / out + excess / into, excess / both, {
            "measured": True, "out_gbs": out / 1e9, "in_gbs": into / 1e9,
            "both_gbs_each_way": both / 1e9,
            "text": f"measured: out {out / 1e9:.1f} GB/s, in {into / 1e9:.1f} GB/s alone, "
                    f"{both / 1e9:.1f} GB/s each way at once"}

    def finish_row(self, row, name):
        c = row["configs"]
        b = (row.get("bound") or {}).get("bound_s")
        bo = (row.get("bound_overlapped") or {}).get("bound_s")
        for k, v in c.items():
            v["vs_bound"] = ratio(v.get("wall_s"), b)
            v["vs_bound_overlapped"] = ratio(v.get("wall_s"), bo)
        nv = c.get("nvshare", {}).get("wall_s")
        row["nvshare_vs_sequential"] = ratio(nv, c.get("sequential", {}).get("wall_s"))
        row["nvshare_vs_serialized"] = ratio(nv, c.get("serialized", {}).get("wall_s"))
        if "before" in c:
            row["nvshare_vs_before"] = ratio(nv, c["before"].get("wall_s"))
        print_table(name, row)

    # --- scenarios ------------------------------------------------------------------------

    def torch_info(self):
        if self.info is None:
            argv = [self.a.python, self.a.torch_job, "--info",
                    "--rates-mib", "0" if self.a.swap_gbs else "4096"]
            out = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                                 env=self.base_env, stdin=subprocess.DEVNULL)
            if out.returncode != 0:
                raise BenchError(f"{shlex.join(argv)}: {out.stderr.strip()[-1500:]}")
            self.info = json.loads(out.stdout.strip().splitlines()[-1])
            self.results["setup"]["torch_info"] = self.info
            print(f"  card: {self.info['name']}, {self.info['total_bytes'] / 2 ** 30:.2f} GiB "
                  f"total, {self.info['free_bytes'] / 2 ** 30:.2f} GiB free; one pass over "
                  f"1 GiB {self.info['ms_per_gib_pass']:.3f} ms (torch {self.info['torch']})"
                  + ("" if not self.info.get("bus") else
                     "; pinned copies of {gib:.0f} GiB: out {out_s:.3f} s, in {in_s:.3f} s, "
                     "both at once {both_s:.3f} s".format(gib=self.info["bus"]["bytes"] / 2 ** 30,
                                                          **self.info["bus"])),
                  flush=True)
        return self.info

    def card_mib(self):
        if self.a.card_gib:
            return int(self.a.card_gib * 1024)
        return self.torch_info()["total_bytes"] // MIB

    def check_real(self, name, n, ws_mib, card_mib):
        """Real allocations: under the card + half the host's RAM together,
        and each process within the card alone."""
        host = host_mem_mib()
        limit = card_mib + host // 2
        if n * ws_mib > limit:
            raise BenchError(f"{name}: refused: {n} x {ws_mib} MiB = {n * ws_mib} MiB is over "
                             f"the card's {card_mib} MiB + half the host's {host} MiB "
                             f"(= {limit} MiB); lower the ratio")
        if ws_mib + 1024 > card_mib:
            raise BenchError(f"{name}: refused: one process of {ws_mib} MiB does not fit the "
                             f"card's {card_mib} MiB alone (with 1 GiB for its context)")

    def torch_scenario(self, name, n, rat):
        p = self.p
        info = self.torch_info()
        card = self.card_mib()
        extra = []
        if p["torch_ws_mib"]:  # --quick, or a size given: --capacity emulates the ratio
            ws = p["torch_ws_mib"]
            cap = int(n * ws / rat)
            if cap < ws + 256:
                raise BenchError(f"{name}: --capacity {cap}M would not hold one {ws} MiB job")
            extra = ["--capacity", f"{cap}M"]
            eff_card = cap
        else:
            ws = int(rat * card / n)
            eff_card = card
        self.check_real(name, n, ws, card)
        passes = max(1, round(p["gpu_s"] * 1000 / (info["ms_per_gib_pass"] * ws / 1024)))
        g = passes * info["ms_per_gib_pass"] * ws / 1024 / 1000
        # Every process's context stays on the card: what moves is what does
        # not fit beside them (none of that where --capacity emulates the card).
        ctx = 0 if extra else (info["total_bytes"] - info["free_bytes"]) // MIB
        excess = max(0, n * (ws + ctx) - eff_card) * MIB
        switch, switch_ovl, rates = self.switch_costs(excess)
        job = [self.a.python, self.a.torch_job, "--ws-mib", ws, "--passes", passes,
               "--steps", p["steps"], "--cpu-s", p["cpu_s"]]
        row = {"processes": n, "ratio": rat, "card_mib": card, "ws_mib": ws, "passes": passes,
               "gpu_step_s_est": g, "steps": p["steps"], "cpu_s": p["cpu_s"],
               "capacity_mib": eff_card if extra else None, "context_mib": ctx,
               "excess_mib": excess // MIB, "switch_s": switch,
               "switch_overlapped_s": switch_ovl, "rates": rates, "configs": {}}
        self.results["scenarios"][name] = row
        print(f"{name}: {n} x {ws} MiB = {n * ws / eff_card:.3f} x "
              f"{'--capacity' if extra else 'the card'} {eff_card} MiB; {p['steps']} steps of "
              f"~{g:.2f} s GPU ({passes} passes) + {p['cpu_s']:.2f} s busy CPU; a switch moves "
              f"{excess / 2 ** 30:.2f} GiB each way (contexts {n} x {ctx} MiB): {switch:.3f} s "
              f"one way after the other, {switch_ovl:.3f} s both at once ({rates['text']})",
              flush=True)
        for cfg in self.configs():
            reps = self.a.torch_repeats if cfg in REPEATED else 1
            row["configs"][cfg] = self.run_repeated(cfg, [job] * n, reps, extra)
            self.write()
        seq = [j for r in row["configs"].get("sequential", {}).get("runs", [])
               for j in r.get("jobs", [])
               if j.get("error") is None]
        row["bound"] = self.bound_from(seq, n, switch, "torch")
        row["bound_overlapped"] = self.bound_from(seq, n, switch_ovl, "torch")
        self.finish_row(row, name)

    def torch_pair(self):
        self.torch_scenario("torch-pair", 2, self.a.ratio)

    def torch_triple(self):
        self.torch_scenario("torch-triple", 3, self.a.ratio3)

    def torch_unequal(self):
        p = self.p
        name = "torch-unequal"
        info = self.torch_info()
        card = self.card_mib()
        extra = []
        if p["torch_ws_mib"]:  # --quick, or a size given: --capacity emulates the ratio
            big = p["torch_ws_mib"]
            small = big // 2
            eff_card = int((big + small) / self.a.ratio_unequal)
            if eff_card < big + 256:
                raise BenchError(f"{name}: --capacity {eff_card}M would not hold the larger job")
            extra = ["--capacity", f"{eff_card}M"]
        else:
            total = self.a.ratio_unequal * card
            big, small, eff_card = int(total * 2 / 3), int(total / 3), card
        host = host_mem_mib()
        if big + small > card + host // 2 or big + 1024 > card:
            raise BenchError(f"{name}: refused: {big} + {small} MiB against the card's {card} "
                             f"MiB and half the host's {host} MiB; lower the ratio")
        passes = max(1, round(p["gpu_s"] * 1000 / (info["ms_per_gib_pass"] * big / 1024)))
        ctx = 0 if extra else (info["total_bytes"] - info["free_bytes"]) // MIB
        excess = max(0, big + small + 2 * ctx - eff_card) * MIB
        switch, switch_ovl, rates = self.switch_costs(excess)
        jobs = [[self.a.python, self.a.torch_job, "--ws-mib", ws, "--passes", passes,
                 "--steps", p["steps"], "--cpu-s", p["cpu_s"]] for ws in (big, small)]
        row = {"processes": 2, "ratio": self.a.ratio_unequal, "card_mib": card,
               "ws_mib": [big, small], "passes": passes, "steps": p["steps"],
               "gpu_step_s_est": passes * info["ms_per_gib_pass"] * big / 1024 / 1000,
               "cpu_s": p["cpu_s"], "capacity_mib": eff_card if extra else None,
               "context_mib": ctx, "excess_mib": excess // MIB, "switch_s": switch,
               "switch_overlapped_s": switch_ovl, "rates": rates, "configs": {}}
        self.results["scenarios"][name] = row
        print(f"{name}: {big} + {small} MiB = {(big + small) / eff_card:.3f} x "
              f"{'--capacity' if extra else 'the card'} {eff_card} MiB; {p['steps']} steps of "
              f"{passes} passes + {p['cpu_s']:.2f} s busy CPU; a switch moves "
              f"{excess / 2 ** 30:.2f} GiB each way ({rates['text']})", flush=True)
        for cfg in self.configs():
            reps = self.a.torch_repeats if cfg in REPEATED else 1
            row["configs"][cfg] = self.run_repeated(cfg, jobs, reps, extra)
            self.write()
        alone = [j.get("wall_s") for r in row["configs"].get("sequential", {}).get("runs", [])
                 for j in r.get("jobs", []) if j.get("error") is None]
        row["longer_alone_s"] = max(alone) if alone else None
        nv = row["configs"].get("nvshare", {}).get("wall_s")
        row["nvshare_vs_longer_alone"] = ratio(nv, row["longer_alone_s"])
        self.finish_row(row, name)

    def emulated(self):
        p = self.p
        ws, cap, n = p["emu_ws_mib"], p["emu_capacity_mib"], p["emu_bursts"]
        self.check_memory("emulated", 2 * ws)
        if cap < ws + 256:
            raise BenchError(f"emulated: --emu-capacity-mib {cap} would not hold one job")
        passes, g = self.passes_for(ws, p["emu_gpu_s"])
        cpu_ms = int(round(p["emu_cpu_s"] * 1000))
        job = [self.a.job, "--ws-mib", ws, "--passes", passes, "--bursts", n, "--cpu-ms", cpu_ms,
               "--cpu-busy"]
        excess = max(0, 2 * ws - cap) * MIB
        switch, switch_ovl, rates = self.switch_costs(excess)
        row = {"processes": 2, "ws_mib": ws, "capacity_mib": cap, "bursts": n, "passes": passes,
               "gpu_burst_s_est": g, "cpu_s": cpu_ms / 1000, "excess_mib": excess // MIB,
               "switch_s": switch, "switch_overlapped_s": switch_ovl, "rates": rates,
               "repeats": p["repeats"], "configs": {}}
        self.results["scenarios"]["emulated"] = row
        print(f"emulated: 2 x {ws} MiB under --capacity {cap}M, {n} bursts of ~{g:.2f} s GPU "
              f"({passes} passes) + {cpu_ms / 1000:.2f} s busy CPU; a switch moves "
              f"{excess / 2 ** 30:.2f} GiB each way: {switch:.3f} s one way after the other, "
              f"{switch_ovl:.3f} s both at once ({rates['text']})", flush=True)
        extra = ["--capacity", f"{cap}M"]
        for cfg in self.configs():
            reps = p["repeats"] if cfg in REPEATED else 1
            row["configs"][cfg] = self.run_repeated(cfg, [job, job], reps, extra)
            self.write()
        seq = [j for r in row["configs"].get("sequential", {}).get("runs", [])
               for j in r.get("jobs", [])
               if j.get("error") is None]
        for j in seq:
            j["cpu_s_param"] = cpu_ms / 1000
        row["bound"] = self.bound_from(seq, 2, switch, "share_job")
        row["bound_overlapped"] = self.bound_from(seq, 2, switch_ovl, "share_job")
        self.finish_row(row, "emulated")


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def print_table(name, r):
    if not r.get("configs"):
        return
    b = r.get("bound") or {}
    if name == "emulated":
        head = (f"\n{name}: 2 x {r['ws_mib']} MiB under --capacity {r['capacity_mib']}M, "
                f"{r['bursts']} bursts of ~{r['gpu_burst_s_est']:.2f} s GPU + "
                f"{r['cpu_s']:.2f} s CPU")
    else:
        head = (f"\n{name}: {r['processes']} x {r['ws_mib']} MiB "
                f"({r['ratio']} x {r['capacity_mib'] or r['card_mib']} MiB), {r['steps']} "
                f"steps of ~{r['gpu_step_s_est']:.2f} s GPU + {r['cpu_s']:.2f} s CPU")
    print(head)
    print(f"  bound {fmt(b.get('bound_s'))} s (alone {fmt(b.get('alone_s'))} s, switch "
          f"{r['switch_s']:.3f} s for {r['excess_mib'] / 1024:.2f} GiB each way"
          f"{'' if not r.get('rates') else '; ' + r['rates']['text']}"
          f"{'' if b.get('exact', True) else ', approximate'})")
    bo = r.get("bound_overlapped") or {}
    print(f"  overlapped bound {fmt(bo.get('bound_s'))} s (switch "
          f"{fmt(bo.get('switch_s'), '.3f')} s: copies out and in at once"
          f"{'' if bo.get('exact', True) else ', approximate'})")
    print(f"  {'config':11} {'median s':>9} {'slowest s':>9} {'slow/med':>8} {'/bound':>7} "
          f"{'/ovl':>6} "
          f"{'runs ok':>7} {'GiB in':>7} {'GiB out':>7} {'swap-ins':>8} {'GiB/swap-in':>11}")
    for k, v in r["configs"].items():
        sw = [x["swaps"] for x in v["runs"] if x.get("swaps")]
        s = sw[-1] if sw else {}
        gin = s.get("bytes_in")
        gout = s.get("bytes_out")
        print(f"  {k:11} {fmt(v['wall_s']):>9} {fmt(v['slowest_s']):>9} "
              f"{fmt(v['slowest_over_median'], '.3f'):>8} {fmt(v.get('vs_bound')):>7} "
              f"{fmt(v.get('vs_bound_overlapped')):>6} "
              f"{v['completed_runs']:>3}/{len(v['runs']):<3} "
              f"{fmt(gin / 2 ** 30 if gin is not None else None, '.1f'):>7} "
              f"{fmt(gout / 2 ** 30 if gout is not None else None, '.1f'):>7} "
              f"{s.get('swap_ins', '-')!s:>8} {fmt(s.get('gib_per_swap_in')):>11}")
        for run in v["runs"]:
            for f in run.get("failed", []):
                print(f"    {k} pid {f['pid']} failed (rc {f['rc']}): {(f['error'] or '')[:200]}")
            if run.get("error"):
                print(f"    {k} failed: {run['error'][:300]}")
    print(f"  nvshare/sequential {fmt(r.get('nvshare_vs_sequential'), '.3f')}, "
          f"nvshare/serialized {fmt(r.get('nvshare_vs_serialized'), '.3f')}"
          + ("" if "nvshare_vs_before" not in r else
             f", nvshare/before {fmt(r.get('nvshare_vs_before'), '.3f')}")
          + ("  (swap figures: the last run's)" if any(
              len(v["runs"]) > 1 for v in r["configs"].values()) else ""), flush=True)
    if r.get("nvshare_vs_longer_alone") is not None:
        print(f"  nvshare / the longer job alone ({r['longer_alone_s']:.2f} s): "
              f"{r['nvshare_vs_longer_alone']:.3f}")


def add_run_args(ap, out, build=None):
    """The options of a run that oversub_bench.py and sweep_bench.py share;
    build: where --nvshared and --lib are by default (else required)."""
    for k, path in (("nvshared", "daemon/nvshared"), ("lib", "preload/libnvshare.so")):
        ap.add_argument("--" + k, required=build is None,
                        default=build and os.path.join(build, path))
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--torch-job", default=os.path.join(here, "torch_job.py"))
    ap.add_argument("--python", default=sys.executable, help="runs torch_job.py")
    ap.add_argument("--nvsharectl", help="collect swap figures from socket-status")
    ap.add_argument("--configs", metavar="LIST",
                    help="only these configurations, comma-separated (without sequential "
                         "there is no bound)")
    ap.add_argument("--lib-before", metavar="LIB",
                    help="one more configuration, `before`: nvshare with this libnvshare.so "
                         "(another build, to compare in the same run), as often as nvshare")
    ap.add_argument("--nvshared-before", metavar="NVSHARED",
                    help="`before` runs this nvshared (with --lib-before, or --lib without it)")
    ap.add_argument("--out", default=out)
    ap.add_argument("--card-gib", type=float, help="the card's memory (default: measured)")
    ap.add_argument("--swap-gbs", type=float,
                    help="the bound's transfer rate each way, GB/s (default: measured on the "
                         "card: pinned copies each way alone and both at once)")
    ap.add_argument("--serial-quantum", default="600s",
                    help="the serialized configuration's --time-quantum")
    ap.add_argument("--torch-repeats", type=int, default=1,
                    help="runs of serialized and nvshare in the torch scenarios")
    ap.add_argument("--job-timeout", type=float, default=300.0,
                    help="seconds one process may run")
    ap.add_argument("--nvshared-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for every nvshared started (repeatable)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="one more environment variable for every job (repeatable)")
    ap.add_argument("--keep-workdir", action="store_true")
    ap.add_argument("--warm-host-gib", type=float, default=0, metavar="N",
                    help="touch N GiB of host memory once before the scenarios (a fresh VM's "
                         "first touch is slow)")
    ap.add_argument("--verbose", action="store_true", help="print every command started")


def check_run_args(ap, a, more=()):
    """Checks add_run_args' options; makes the paths absolute."""
    for kv in a.env:
        if "=" not in kv:
            ap.error(f"--env {kv}: NAME=VALUE expected")
    bad = [c for c in (a.configs or "").split(",") if c and c not in ALL_CONFIGS]
    if bad:
        ap.error(f"unknown configuration(s) {bad}; known: {', '.join(ALL_CONFIGS)}")
    for k in ("nvshared", "lib", "lib_before", "nvshared_before", "torch_job",
              "nvsharectl") + tuple(more):
        v = getattr(a, k)
        if v is None:
            continue
        setattr(a, k, os.path.abspath(v))
        if not os.path.isfile(getattr(a, k)):
            ap.error(f"--{k.replace('_', '-')} {v}: no such file")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    add_run_args(ap, "oversub_bench.json")
    ap.add_argument("--job", required=True)
    ap.add_argument("--only", default=",".join(SCENARIOS),
                    help="scenarios, comma-separated (default: all)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: about a minute")
    ap.add_argument("--ratio", type=float, default=1.15, help="torch-pair: memory / card")
    ap.add_argument("--ratio3", type=float, default=1.25, help="torch-triple: memory / card")
    ap.add_argument("--ratio-unequal", type=float, default=1.06,
                    help="torch-unequal: memory of both / card")
    ap.add_argument("--max-concurrent-gib", type=float, default=40,
                    help="emulated: refuse jobs that together allocate more")
    for k, v in FULL.items():
        ap.add_argument("--" + k.replace("_", "-"), type=type(v), default=None,
                        help=f"default {v} ({QUICK[k]} with --quick)")
    a = ap.parse_args()
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenario(s) {bad}; known: {', '.join(SCENARIOS)}")
    check_run_args(ap, a, ("job",))
    defaults = QUICK if a.quick else FULL
    p = {k: (getattr(a, k) if getattr(a, k) is not None else v) for k, v in defaults.items()}

    if a.warm_host_gib > 0:
        warm_host(a.warm_host_gib)
    b = OversubBench(a, p)
    failed, t_start = run_scenarios(
        b, only, lambda name: getattr(b, name.replace("-", "_")),
        "" if a.nvsharectl else "; no --nvsharectl: no swap figures")
    print("\n===== oversub_bench summary =====")
    for name in only:
        r = b.results["scenarios"].get(name, {})
        if "error" in r:
            print(f"\n{name}: FAILED: {r['error']}")
        print_table(name, r)
    return finish(b, failed, t_start)


if __name__ == "__main__":
    sys.exit(main())
