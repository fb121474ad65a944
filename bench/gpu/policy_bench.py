#!/usr/bin/env python3
"""Scheduling-policy benchmark of the default mode (issue 14).

Each scenario runs its configurations one after the other in one session, so
that their figures compare:

  sequential  the jobs one after the other, no nvshare (where meaningful)
  plain       the jobs at once, plain CUDA, no nvshare
  auto        nvshared --anti-thrashing auto (the default mode)
  on          nvshared --anti-thrashing on --time-quantum 2s

nvshared is started per configuration on a temporary socket (--no-bus, an
empty config file and a temporary state directory, so that nothing on the
machine changes its settings); the jobs (bench/gpu/share_job) get
LD_PRELOAD=libnvshare.so and NVSHARE_SOCKET.

Scenarios (--only picks some; sizes by options):
  bursty       two jobs, 16 GiB each, 6 bursts of ~2 s GPU work separated by
               2 s of busy CPU: completion time of the pair, the ideal
               (share_bench.simulate_ideal) and auto/on
  interactive  an interactive job (1 GiB, 0.05 s bursts every 2 s, 8 bursts)
               next to a batch job (16 GiB, 4 s bursts without pause):
               the interactive job's median and worst burst latency; then
               oversubscribed (--capacity: the batch job + half the interactive one, the
               interactive job with NVSHARE_PRIORITY=interactive): worst
               burst and the interactive job's swap-ins
  steady       two jobs, 8 GiB each, one ~10 s burst each: completion time
               of the pair, auto/plain
  fairness     user A (uid 1001) runs 4 steady jobs, user B (uid 1002) 1, all
               at once for 25 s; each user's share of the passes done while
               all 5 ran (needs root)

Usage: policy_bench.py --nvshared BIN --nvsharectl BIN --lib LIB --job BIN
                       [--only bursty,interactive,steady,fairness] [--quick]
                       [--out policy_bench.json] [--verbose] [--keep-workdir]
                       [--nvshared-arg ARG]... [--env NAME=VALUE]...
The full run takes about 6.5 minutes (bursty 2.3, interactive 1.5, steady
1.1, fairness 1.5); --quick about a minute. Needs Python >= 3.9.
Prints a table per scenario; writes every figure as JSON to --out (after
each scenario, so a failed run keeps what it measured). Exit status 1 if a
scenario failed.
"""
import argparse
import contextlib
import ctypes
import json
import math
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from share_bench import simulate_ideal  # noqa: E402

SCENARIOS = ("bursty", "interactive", "steady", "fairness")

# Sizes and times: the full run, and --quick (each scenario a few seconds,
# to check the script and the machine before a full run).
FULL = dict(bursty_ws_mib=16384, bursty_bursts=6, bursty_gpu_s=2.0, bursty_cpu_s=2.0,
            batch_ws_mib=16384, batch_burst_s=4.0,
            inter_ws_mib=1024, inter_burst_s=0.05, inter_period_s=2.0, inter_bursts=8,
            steady_ws_mib=8192, steady_gpu_s=10.0,
            fair_ws_mib=2048, fair_duration_s=25.0, fair_jobs_a=4, fair_jobs_b=1,
            fair_chunk_ms=20.0)
QUICK = dict(bursty_ws_mib=1024, bursty_bursts=2, bursty_gpu_s=0.3, bursty_cpu_s=0.3,
             batch_ws_mib=1024, batch_burst_s=0.5,
             inter_ws_mib=256, inter_burst_s=0.02, inter_period_s=0.3, inter_bursts=3,
             steady_ws_mib=1024, steady_gpu_s=1.0,
             fair_ws_mib=512, fair_duration_s=4.0, fair_jobs_a=4, fair_jobs_b=1,
             fair_chunk_ms=20.0)

# Issue 14's targets for the default mode (auto).
TARGET_BURSTY_VS_ON = 1.10       # bursty pair within 10 % of `on`
TARGET_INTERACTIVE_WORST_S = 0.15
TARGET_STEADY_VS_PLAIN = 1.00    # no slower than plain CUDA
STEADY_NOISE = 0.02              # what the check allows for run-to-run noise
TARGET_FAIR_SHARE = (0.40, 0.60)  # each user 50 % +- 10 %


class BenchError(Exception):
    pass


class Stop(BaseException):
    """SIGTERM/SIGHUP: unwind so that every process started is ended."""


def tail(path, n=1500):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:
    _libc = None


def set_pdeathsig():
    """In a child before exec (no thread may run in the parent then): it gets
    SIGKILL when the bench ends, however it ends."""
    if _libc is not None:
        _libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def value_at(marks, t):
    """Passes done by time t, from [time, passes] marks (linear in between)."""
    if not marks or t <= marks[0][0]:
        return 0.0
    for (t0, n0), (t1, n1) in zip(marks, marks[1:]):
        if t <= t1:
            return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else float(n1)
    return float(marks[-1][1])


class Watcher:
    """Polls `nvsharectl socket-status` while jobs run: the pids it saw (did
    the jobs really register?), each client's status whenever its swap
    counts changed, and the last document."""

    def __init__(self, ctl, sock, env, period=0.05):
        self.ctl, self.sock, self.env, self.period = ctl, sock, env, period
        self.seen = {}      # pid -> uid
        self.history = {}   # pid -> [client status each time its swap counts changed]
        self.last = None
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def query(self):
        out = subprocess.run([self.ctl, "-s", self.sock, "socket-status"], capture_output=True,
                             text=True, timeout=5, env=self.env, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            raise BenchError(f"nvsharectl socket-status: {out.stderr.strip()}")
        return json.loads(out.stdout)

    def _run(self):
        while not self._stop.is_set():
            try:
                doc = self.query()
                self.last = doc
                for c in doc.get("clients", []):
                    self.seen[c["pid"]] = c.get("uid")
                    h = self.history.setdefault(c["pid"], [])
                    if not h or (c["swap_ins"], c["swap_outs"]) != (h[-1]["swap_ins"],
                                                                    h[-1]["swap_outs"]):
                        h.append(c)
            except Exception:
                self.errors += 1
            self._stop.wait(self.period)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=15)

    def swap_ins(self, pid):
        """The client's swap-ins: count, total and longest single one (s)."""
        h = self.history.get(pid, [])
        if not h:
            return {}
        single = [(b["swap_in_us"] - a["swap_in_us"]) / 1e6 for a, b in zip(h, h[1:])
                  if b["swap_ins"] - a["swap_ins"] == 1]
        r = {"swap_ins": h[-1]["swap_ins"], "swap_in_total_s": h[-1]["swap_in_us"] / 1e6,
             "swap_outs": h[-1]["swap_outs"], "bytes_prefetched": h[-1]["bytes_prefetched"]}
        if single:
            r["swap_in_max_s"] = max(single)
        if h[-1]["swap_ins"]:
            r["swap_in_mean_s"] = h[-1]["swap_in_us"] / 1e6 / h[-1]["swap_ins"]
        return r


class Bench:
    def __init__(self, a, p):
        self.a, self.p = a, p
        self.wd = tempfile.mkdtemp(prefix="policy_bench.")
        os.chmod(self.wd, 0o755)  # other users' jobs reach the socket and binaries here
        self.conf = os.path.join(self.wd, "empty.conf")
        open(self.conf, "w").close()
        os.chmod(self.conf, 0o644)
        self.live = []      # jobs started and not yet reaped
        self.daemons = []
        self.seq = 0
        self.failures = 0
        self.calibrated = {}
        self.user_bin = None
        self.base_env = {k: v for k, v in os.environ.items()
                         if k != "LD_PRELOAD" and not k.startswith("NVSHARE_")}
        self.extra_env = dict(kv.split("=", 1) for kv in a.env)
        self.results = {"setup": {"quick": a.quick, "params": p, "workdir": self.wd,
                                  "on_quantum": a.on_quantum,
                                  "nvshared_args": a.nvshared_arg, "env": self.extra_env},
                        "scenarios": {}}

    # --- processes -----------------------------------------------------------------

    def next_id(self):
        self.seq += 1
        return self.seq

    def start_job(self, args, sock, env=None, user=None, tag="job"):
        """share_job with args; under nvshare when sock is given. user: (uid, gid)."""
        n = self.next_id()
        e = dict(self.base_env)
        job, lib = self.a.job, self.a.lib
        kw = {}
        if user is not None:
            job, lib = self.user_bin["job"], self.user_bin["lib"]
            e["HOME"] = self.user_home(user)
            e["USER"] = e["LOGNAME"] = f"u{user[0]}"
            # setgroups([]), setgid, setuid in the child (Python >= 3.9); no
            # preexec_fn, which is unsafe while the watcher thread runs.
            kw = dict(user=user[0], group=user[1], extra_groups=[])
        if sock:
            e.update(LD_PRELOAD=lib, NVSHARE_SOCKET=sock)
        e.update(self.extra_env)
        e.update(env or {})
        argv = [job] + [str(x) for x in args] + ["--die-with-parent"]
        out_path = os.path.join(self.wd, f"{tag}-{n}.out")
        err_path = os.path.join(self.wd, f"{tag}-{n}.err")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            p = subprocess.Popen(argv, env=e, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                 cwd=self.wd, **kw)
        p.out_path, p.err_path, p.tag = out_path, err_path, tag
        self.live.append(p)
        if self.a.verbose:
            extra = {k: v for k, v in e.items()
                     if k.startswith("NVSHARE_") and k != "NVSHARE_SOCKET"}
            print(f"    started {tag} pid {p.pid}: {shlex.join(argv)}"
                  + (f" (uid {user[0]})" if user else "")
                  + (f" {extra}" if extra else ""), flush=True)
        return p

    def finish(self, p, deadline):
        """Waits for job p (until deadline, time.monotonic()); its result:
        the last JSON line holding total_s."""
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise BenchError(f"{p.tag} (pid {p.pid}) still running at its time limit; "
                             f"stderr: {tail(p.err_path).strip()}")
        self.live.remove(p)
        if p.returncode != 0:
            raise BenchError(f"{p.tag} (pid {p.pid}) exited with {p.returncode}; "
                             f"stderr: {tail(p.err_path).strip()}")
        with open(p.out_path) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{") and "total_s" in l]
        if not lines:
            raise BenchError(f"{p.tag} (pid {p.pid}) printed no result; "
                             f"stderr: {tail(p.err_path).strip()}")
        return json.loads(lines[-1])

    @staticmethod
    def end(p, grace=10):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)

    def stop_job(self, p):
        self.end(p)
        if p in self.live:
            self.live.remove(p)

    def kill_jobs(self):
        for p in list(self.live):
            if p.poll() is None:
                p.kill()
        for p in list(self.live):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                print(f"warning: pid {p.pid} did not end after SIGKILL", file=sys.stderr)
        self.live.clear()

    def kill_all(self):
        self.kill_jobs()
        for d in list(self.daemons):
            self.end(d, grace=5)
        self.daemons.clear()

    @contextlib.contextmanager
    def daemon(self, args):
        """nvshared with args on a fresh socket, and a Watcher on it; yields
        (socket, watcher), or (None, None) when args is None (no nvshare)."""
        if args is None:
            yield None, None
            return
        n = self.next_id()
        sock = os.path.join(self.wd, f"nvshared-{n}.sock")
        log_path = os.path.join(self.wd, f"nvshared-{n}.log")
        cmd = [self.a.nvshared, "--socket", sock, "--no-bus", "--config", self.conf,
               "--state-dir", os.path.join(self.wd, f"state-{n}")] + args + self.a.nvshared_arg
        if self.a.verbose:
            print(f"    nvshared: {shlex.join(cmd)}", flush=True)
        # preexec_fn only while no other thread runs (watchers are stopped by now).
        pre = set_pdeathsig if threading.active_count() == 1 else None
        with open(log_path, "w") as log:
            d = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, preexec_fn=pre)
        self.daemons.append(d)
        w = None
        try:
            deadline = time.monotonic() + 15
            while True:  # listening, not just bound
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
            w = Watcher(self.a.nvsharectl, sock, self.base_env)
            w.query()  # nvsharectl works, or the error says why
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

    def check_seen(self, w, procs, row, label):
        """Were all jobs clients of nvshared? (A job that fails to reach the
        daemon would run unshared and make the figures meaningless.)"""
        if w is None:
            return
        missing = [p.pid for p in procs if p.pid not in w.seen]
        row["clients_seen"] = len(procs) - len(missing)
        if missing:
            row["warning"] = (f"{label}: jobs {missing} never showed in socket-status "
                              f"({w.errors} failed polls): did they run under nvshare?")
            print(f"    WARNING: {row['warning']}", flush=True)

    # --- set-up ---------------------------------------------------------------------

    def calibrate(self, ws_mib):
        if ws_mib not in self.calibrated:
            out = subprocess.run([self.a.job, "--calibrate", "--ws-mib", str(ws_mib),
                                  "--die-with-parent"], capture_output=True, text=True,
                                 timeout=180, env=self.base_env, stdin=subprocess.DEVNULL)
            if out.returncode != 0:
                raise BenchError(f"share_job --calibrate --ws-mib {ws_mib}: {out.stderr.strip()}")
            ms = json.loads(out.stdout.strip().splitlines()[-1])["ms_per_pass"]
            self.calibrated[ws_mib] = ms
            self.results["setup"].setdefault("ms_per_pass", {})[str(ws_mib)] = ms
            print(f"  calibrated: {ws_mib} MiB, {ms:.3f} ms per pass", flush=True)
        return self.calibrated[ws_mib]

    def passes_for(self, ws_mib, gpu_s):
        ms = self.calibrate(ws_mib)
        passes = max(1, round(gpu_s * 1000 / ms))
        return passes, passes * ms / 1000

    def check_memory(self, name, total_mib):
        if total_mib > self.a.max_concurrent_gib * 1024:
            raise BenchError(f"{name}: {total_mib} MiB of managed memory at once is over "
                             f"--max-concurrent-gib {self.a.max_concurrent_gib}")

    def config_args(self, cfg, extra=()):
        """nvshared's arguments for a configuration; None: no nvshare."""
        if cfg in ("plain", "sequential"):
            return None
        base = {"auto": ["--anti-thrashing", "auto"],
                "on": ["--anti-thrashing", "on", "--time-quantum", self.a.on_quantum]}[cfg]
        return base + list(extra)

    def user_home(self, user):
        home = os.path.join(self.wd, f"home-{user[0]}")
        if not os.path.isdir(home):
            os.mkdir(home, 0o700)
            os.chown(home, user[0], user[1])
        return home

    def prepare_users(self, users):
        """Copies of the job and the library that other uids can read (the
        originals may sit under a directory only root can enter), and a
        check, as each uid, that it reaches them and the work directory."""
        if self.user_bin is None:
            d = os.path.join(self.wd, "bin")
            os.mkdir(d, 0o755)
            job, lib = os.path.join(d, "share_job"), os.path.join(d, "libnvshare.so")
            shutil.copyfile(self.a.job, job)
            shutil.copyfile(self.a.lib, lib)
            os.chmod(job, 0o755)
            os.chmod(lib, 0o755)
            self.user_bin = {"job": job, "lib": lib}
        for user in users:
            env = dict(self.base_env, HOME=self.user_home(user))
            probe = (f'test -x {shlex.quote(self.user_bin["job"])} && '
                     f'test -r {shlex.quote(self.user_bin["lib"])} && test -w "$HOME" && '
                     f'test -x {shlex.quote(self.wd)}')
            r = subprocess.run(["/bin/sh", "-c", probe], env=env, user=user[0], group=user[1],
                               extra_groups=[], capture_output=True, text=True, timeout=20,
                               stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                raise BenchError(f"uid {user[0]} cannot reach the job, the library or "
                                 f"{self.wd}: {r.stderr.strip()}")

    # --- runs -----------------------------------------------------------------------

    def run_together(self, cfg, jobs, limit_s, extra_args=()):
        """The jobs (argument lists) at once, or one after the other for
        `sequential`: wall time from the first start to the last end."""
        row = {}
        with self.daemon(self.config_args(cfg, extra_args)) as (sock, w):
            t0 = time.monotonic()
            deadline = t0 + limit_s
            procs = []
            if cfg == "sequential":
                outs = []
                for j in jobs:
                    procs.append(self.start_job(j, None, tag=cfg))
                    outs.append(self.finish(procs[-1], deadline))
            else:
                procs = [self.start_job(j, sock, tag=cfg) for j in jobs]
                outs = [self.finish(p, deadline) for p in procs]
            row["wall_s"] = time.monotonic() - t0
            self.check_seen(w, procs, row, cfg)
        row["jobs_total_s"] = [o["total_s"] for o in outs]
        row["bursts_s"] = [o["bursts_s"] for o in outs]
        return row

    def run_interactive(self, label, cfg, batch, inter, limit_s, extra_args=(), inter_env=None):
        """The batch job, then (once it is ready to submit) the interactive
        job; the batch job is ended when the interactive one is done."""
        row = {}
        with self.daemon(self.config_args(cfg, extra_args)) as (sock, w):
            ready = os.path.join(self.wd, f"ready-{self.next_id()}")
            b = self.start_job(batch + ["--ready-file", ready], sock, tag="batch")
            deadline = time.monotonic() + 180
            while not os.path.exists(ready):
                if b.poll() is not None:
                    self.finish(b, time.monotonic())  # raises with its stderr
                    raise BenchError("the batch job ended before its first burst")
                if time.monotonic() > deadline:
                    raise BenchError("the batch job was not ready after 180 s")
                time.sleep(0.02)
            t0 = time.monotonic()
            i = self.start_job(inter + ["--progress"], sock, env=inter_env, tag="interactive")
            try:
                i.wait(timeout=limit_s)
            except subprocess.TimeoutExpired:
                pass
            if i.returncode is None:
                # Over its limit (a wait of a whole long quantum, say): what it
                # did so far, and the burst it is in as a lower bound.
                now = time.monotonic()
                self.stop_job(i)
                out = self.partial_bursts(i.out_path, now)
                row["timed_out_after_s"] = limit_s
                print(f"    WARNING: {label}: the interactive job was stopped at its limit of "
                      f"{limit_s:.0f} s (--inter-limit-s) after {len(out['bursts_s'])} bursts",
                      flush=True)
            else:
                out = self.finish(i, time.monotonic())
            row["batch_outlasted"] = b.poll() is None
            if not row["batch_outlasted"]:
                print("    WARNING: the batch job ended before the interactive one", flush=True)
                self.finish(b, time.monotonic())  # an error if it failed
            else:
                self.stop_job(b)
            row["wall_s"] = time.monotonic() - t0
            self.check_seen(w, [b, i], row, label)
            if w:
                row["interactive_swaps"] = w.swap_ins(i.pid)
                row["batch_swaps"] = w.swap_ins(b.pid)
        lat = sorted(out["bursts_s"])
        if not lat:
            raise BenchError(f"{label}: the interactive job completed no burst within "
                             f"{limit_s:.0f} s")
        row.update(median_s=statistics.median(lat), worst_s=lat[-1], bursts_s=out["bursts_s"])
        if out.get("pending_burst_s") is not None:
            row["pending_burst_at_least_s"] = out["pending_burst_s"]
            row["worst_s"] = max(row["worst_s"], out["pending_burst_s"])
        return row

    @staticmethod
    def partial_bursts(path, now):
        """The bursts a --progress job reported; the one still running, as
        the time since it started (a lower bound of its latency)."""
        bursts, started = {}, {}
        with open(path) as f:
            for line in f:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                if "latency_s" in d:
                    bursts[d["burst"]] = d["latency_s"]
                elif "burst_start" in d:
                    started[d["burst_start"]] = d["t"]
        pending = [t for b, t in started.items() if b not in bursts]
        return {"bursts_s": [bursts[b] for b in sorted(bursts)],
                "pending_burst_s": now - max(pending) if pending else None}

    def attempt(self, label, fn, *args):
        """One configuration's run: its row, or {"error": ...} (the other
        configurations still run; the exit status says one failed)."""
        try:
            return fn(*args)
        except BenchError as e:
            self.failures += 1
            print(f"  {label}: FAILED: {e}", flush=True)
            return {"error": str(e)}

    # --- scenarios ------------------------------------------------------------------

    def bursty(self):
        p = self.p
        ws, n = p["bursty_ws_mib"], p["bursty_bursts"]
        self.check_memory("bursty", 2 * ws)
        passes, g = self.passes_for(ws, p["bursty_gpu_s"])
        cpu_ms = int(round(p["bursty_cpu_s"] * 1000))
        job = ["--ws-mib", ws, "--passes", passes, "--bursts", n, "--cpu-ms", cpu_ms, "--cpu-busy"]
        ideal = simulate_ideal(n, g, cpu_ms / 1000)
        solo = n * g + (n - 1) * cpu_ms / 1000
        row = {"ws_mib": ws, "bursts": n, "passes": passes, "gpu_burst_s": g,
               "cpu_s": cpu_ms / 1000, "cpu": "busy", "ideal_s": ideal, "configs": {}}
        self.results["scenarios"]["bursty"] = row
        print(f"bursty: 2 jobs x {n} bursts of {g:.2f} s GPU ({passes} passes over {ws} MiB), "
              f"{cpu_ms / 1000:.2f} s busy CPU between; ideal {ideal:.2f} s", flush=True)
        for cfg in ("sequential", "plain", "auto", "on"):
            r = self.attempt(cfg, self.run_together, cfg, [job, job], 4 * 2 * solo + 120)
            row["configs"][cfg] = r
            if "wall_s" in r:
                r["vs_ideal"] = r["wall_s"] / ideal
                print(f"  {cfg}: {r['wall_s']:.2f} s [{r['vs_ideal']:.2f} of ideal]", flush=True)
        c = row["configs"]
        if "wall_s" in c["auto"] and "wall_s" in c["on"]:
            row["auto_vs_on"] = c["auto"]["wall_s"] / c["on"]["wall_s"]
            row["target"] = {"auto_vs_on_max": TARGET_BURSTY_VS_ON,
                             "met": row["auto_vs_on"] <= TARGET_BURSTY_VS_ON}

    def interactive(self):
        p = self.p
        bws, iws = p["batch_ws_mib"], p["inter_ws_mib"]
        self.check_memory("interactive", bws + iws)
        bpasses, bg = self.passes_for(bws, p["batch_burst_s"])
        ipasses, ig = self.passes_for(iws, p["inter_burst_s"])
        ni, period = p["inter_bursts"], p["inter_period_s"]
        icpu_ms = max(0, int(round((period - ig) * 1000)))
        inter_solo = ni * ig + (ni - 1) * icpu_ms / 1000
        # Enough bursts to outlast the interactive job even when it is slowed
        # down 4 times; it is ended as soon as the interactive job is done.
        nb = max(2, math.ceil((4 * inter_solo + 60) / bg))
        batch = ["--ws-mib", bws, "--passes", bpasses, "--bursts", nb, "--cpu-ms", 0]
        inter = ["--ws-mib", iws, "--passes", ipasses, "--bursts", ni, "--cpu-ms", icpu_ms]
        # Below the pair's total but above the batch job alone: each job fits
        # by itself (a single job above the capacity is refused, as a job
        # above the card's memory would be), the two together do not.
        cap = bws + iws // 2
        # Bounds the time budget: a burst that waits for a whole 30 s quantum
        # shows as one over the limit instead of stretching the run.
        limit = self.a.inter_limit_s or 2 * inter_solo + 10
        row = {"batch_ws_mib": bws, "batch_passes": bpasses, "batch_burst_s": bg,
               "inter_ws_mib": iws, "inter_passes": ipasses, "inter_burst_s": ig,
               "inter_bursts": ni, "inter_pause_s": icpu_ms / 1000,
               "oversubscribed_capacity_mib": cap, "configs": {}}
        self.results["scenarios"]["interactive"] = row
        print(f"interactive: {ni} bursts of {ig * 1000:.0f} ms ({ipasses} passes over {iws} MiB) "
              f"every {period:.2f} s next to a batch job ({bg:.2f} s bursts over {bws} MiB); "
              f"oversubscribed: --capacity {cap}M", flush=True)
        runs = [("plain", "plain", (), None), ("auto", "auto", (), None), ("on", "on", (), None)]
        prio = {"NVSHARE_PRIORITY": "interactive"}
        runs += [(f"{c}/oversubscribed", c, ("--capacity", f"{cap}M"), prio)
                 for c in ("auto", "on")]
        for name, cfg, extra, env in runs:
            r = self.attempt(name, self.run_interactive, name, cfg, batch, inter, limit, extra, env)
            row["configs"][name] = r
            if "error" in r:
                continue
            s = r.get("interactive_swaps", {})
            swap = (f", interactive swap-ins {s['swap_ins']} (longest {s['swap_in_max_s']:.3f} s)"
                    if s.get("swap_in_max_s") is not None else "")
            print(f"  {name}: median {r['median_s']:.3f} s, worst {r['worst_s']:.3f} s{swap}",
                  flush=True)
        if "worst_s" in row["configs"]["auto"]:
            a = row["configs"]["auto"]["worst_s"]
            row["target"] = {"auto_worst_max_s": TARGET_INTERACTIVE_WORST_S,
                             "met": a <= TARGET_INTERACTIVE_WORST_S}

    def steady(self):
        p = self.p
        ws = p["steady_ws_mib"]
        self.check_memory("steady", 2 * ws)
        passes, g = self.passes_for(ws, p["steady_gpu_s"])
        job = ["--ws-mib", ws, "--passes", passes, "--bursts", 1, "--cpu-ms", 0]
        row = {"ws_mib": ws, "passes": passes, "gpu_s": g, "ideal_s": 2 * g, "configs": {}}
        self.results["scenarios"]["steady"] = row
        print(f"steady: 2 jobs x one burst of {g:.2f} s GPU ({passes} passes over {ws} MiB)",
              flush=True)
        for cfg in ("plain", "auto", "on"):
            r = self.attempt(cfg, self.run_together, cfg, [job, job], 4 * 2 * g + 120)
            row["configs"][cfg] = r
            if "wall_s" in r:
                print(f"  {cfg}: {r['wall_s']:.2f} s", flush=True)
        c = row["configs"]
        if "wall_s" in c["plain"]:
            for cfg in ("auto", "on"):
                if "wall_s" in c[cfg]:
                    row[f"{cfg}_vs_plain"] = c[cfg]["wall_s"] / c["plain"]["wall_s"]
        if "auto_vs_plain" in row:
            row["target"] = {"auto_vs_plain_max": TARGET_STEADY_VS_PLAIN, "noise": STEADY_NOISE,
                             "met": row["auto_vs_plain"] <= TARGET_STEADY_VS_PLAIN + STEADY_NOISE}

    def fairness(self):
        p = self.p
        if os.geteuid() != 0:
            raise BenchError("fairness runs jobs as other uids and needs root")
        ua, ub = (self.a.uid_a, self.a.uid_a), (self.a.uid_b, self.a.uid_b)
        na, nb, ws, dur = p["fair_jobs_a"], p["fair_jobs_b"], p["fair_ws_mib"], p["fair_duration_s"]
        self.check_memory("fairness", (na + nb) * ws)
        self.prepare_users([ua, ub])
        ms = self.calibrate(ws)
        chunk = max(1, round(p["fair_chunk_ms"] / ms))
        job = ["--ws-mib", ws, "--duration-s", dur, "--chunk", chunk]
        row = {"ws_mib": ws, "duration_s": dur, "chunk": chunk, "ms_per_pass": ms,
               "uid_a": ua[0], "uid_b": ub[0], "jobs_a": na, "jobs_b": nb, "configs": {}}
        self.results["scenarios"]["fairness"] = row
        print(f"fairness: uid {ua[0]} runs {na} jobs, uid {ub[0]} {nb}, each passes over "
              f"{ws} MiB ({ms:.3f} ms) for {dur:.1f} s", flush=True)
        # B's jobs among A's, so that no user is always started first.
        users = [ua] * na
        for k in range(nb):
            users.insert((k + 1) * len(users) // (nb + 1), ub)
        for cfg in ("plain", "auto", "on"):
            r = self.attempt(cfg, self.run_fair, cfg, job, users, ua, ub, ms, dur)
            row["configs"][cfg] = r
            if "error" not in r:
                print(f"  {cfg}: window {r['window_s']:.1f} s, user A {pct(r['share_a'])}, "
                      f"user B {pct(r['share_b'])}", flush=True)
        sb = row["configs"]["auto"].get("share_b")
        if sb is not None:
            row["target"] = {"share_range": TARGET_FAIR_SHARE,
                             "met": TARGET_FAIR_SHARE[0] <= sb <= TARGET_FAIR_SHARE[1]}

    def run_fair(self, cfg, job, users, ua, ub, ms, dur):
        """All the jobs at once, each as its user; the passes each user's
        jobs did while all of them ran."""
        r = {}
        with self.daemon(self.config_args(cfg)) as (sock, w):
            deadline = time.monotonic() + 3 * dur + 180
            procs = [(u, self.start_job(job, sock, user=u, tag=f"{cfg}-uid{u[0]}"))
                     for u in users]
            outs = [(u, self.finish(pr, deadline)) for u, pr in procs]
            self.check_seen(w, [pr for _, pr in procs], r, cfg)
            if w:  # the daemon's own account, exited clients included: the whole run
                held = {}
                for u in w.query().get("usage", []):
                    held[u["uid"]] = held.get(u["uid"], 0) + u["held_us"]
                tot = sum(held.get(x[0], 0) for x in (ua, ub))
                if tot:
                    r["daemon_held_share_b"] = held.get(ub[0], 0) / tot
        # Each job competes from its first pass (start_s) to its last (end_s).
        w0 = max(o["start_s"] for _, o in outs)
        w1 = min(o["end_s"] for _, o in outs)
        r["window_s"] = w1 - w0
        if w1 <= w0:
            raise BenchError(f"{cfg}: the jobs never all ran at once (last start "
                             f"{w0:.2f}, first end {w1:.2f})")

        def share(t0, t1):
            per = [(u, value_at(o["marks"], t1) - value_at(o["marks"], t0)) for u, o in outs]
            a = sum(n for u, n in per if u == ua)
            b = sum(n for u, n in per if u == ub)
            return a, b, per

        a, b, per = share(w0, w1)
        r.update(passes_a=a, passes_b=b, share_a=a / (a + b) if a + b else None,
                 share_b=b / (a + b) if a + b else None,
                 passes_per_job=[[u[0], n] for u, n in per],
                 total_passes=[o["passes"] for _, o in outs])
        mid = (w0 + w1) / 2
        halves = [share(w0, mid), share(mid, w1)]
        r["share_b_halves"] = [h[1] / (h[0] + h[1]) if h[0] + h[1] else None for h in halves]
        # The GPU's throughput in the window against one job alone.
        r["throughput_vs_solo"] = (a + b) / r["window_s"] / (1000 / ms)
        if r["window_s"] < dur / 2:
            r["warning_window"] = (f"the window in which all ran is {r['window_s']:.1f} s "
                                   f"of {dur:.1f} s")
            print(f"    WARNING: {cfg}: {r['warning_window']}", flush=True)
        return r

    def write(self):
        with open(self.a.out, "w") as f:
            json.dump(self.results, f, indent=1)


def met(ok):
    return "met" if ok else "NOT met"


def pct(x):
    return "-" if x is None else f"{x:.1%}"


def failed_row(name, row, width):
    if "error" not in row:
        return False
    print(f"  {name:{width}} FAILED: {row['error'][:300]}")
    return True


def print_tables(res):
    sc = res["scenarios"]
    print("\n===== policy_bench summary =====")
    for name in SCENARIOS:
        if name not in sc:
            continue
        r = sc[name]
        if "error" in r:
            print(f"\n{name}: FAILED: {r['error']}")
        if not r.get("configs"):
            continue
        c = r["configs"]
        if name == "bursty":
            print(f"\nbursty: 2 x {r['bursts']} bursts of {r['gpu_burst_s']:.2f} s GPU, "
                  f"{r['cpu_s']:.2f} s busy CPU, {r['ws_mib']} MiB each; ideal {r['ideal_s']:.2f} s")
            print(f"  {'config':12} {'pair s':>8} {'/ideal':>7}")
            for k, v in c.items():
                if not failed_row(k, v, 12):
                    print(f"  {k:12} {v['wall_s']:8.2f} {v['vs_ideal']:7.2f}")
            if "auto_vs_on" in r:
                print(f"  auto/on {r['auto_vs_on']:.3f} (target <= {TARGET_BURSTY_VS_ON:.2f}): "
                      f"{met(r['target']['met'])}")
        elif name == "interactive":
            print(f"\ninteractive: {r['inter_bursts']} bursts of {r['inter_burst_s'] * 1000:.0f} ms "
                  f"over {r['inter_ws_mib']} MiB, pause {r['inter_pause_s']:.2f} s, next to a "
                  f"batch job ({r['batch_burst_s']:.2f} s bursts, {r['batch_ws_mib']} MiB); "
                  f"oversubscribed: --capacity {r['oversubscribed_capacity_mib']}M, "
                  f"NVSHARE_PRIORITY=interactive")
            print(f"  {'config':20} {'median s':>9} {'worst s':>8} {'swap-ins':>8} "
                  f"{'longest swap-in s':>17} {'worst - swap-in s':>17}")
            for k, v in c.items():
                if failed_row(k, v, 20):
                    continue
                s = v.get("interactive_swaps", {})
                sm = s.get("swap_in_max_s")
                longest = "-" if sm is None else f"{sm:.3f}"
                less = "-" if sm is None else f"{v['worst_s'] - sm:.3f}"
                worst = (">=" if "timed_out_after_s" in v else "") + f"{v['worst_s']:.3f}"
                print(f"  {k:20} {v['median_s']:9.3f} {worst:>8} "
                      f"{s.get('swap_ins', '-')!s:>8} {longest:>17} {less:>17}")
            if "target" in r:
                print(f"  auto worst {c['auto']['worst_s']:.3f} s (target <= "
                      f"{TARGET_INTERACTIVE_WORST_S} s): {met(r['target']['met'])}; "
                      f"oversubscribed: compare 'worst - swap-in' with the interactive class's bound")
        elif name == "steady":
            print(f"\nsteady: 2 jobs x one burst of {r['gpu_s']:.2f} s GPU, {r['ws_mib']} MiB each")
            print(f"  {'config':12} {'pair s':>8} {'/plain':>7}")
            plain = c.get("plain", {}).get("wall_s")
            for k, v in c.items():
                if not failed_row(k, v, 12):
                    rel = f"{v['wall_s'] / plain:.3f}" if plain else "-"
                    print(f"  {k:12} {v['wall_s']:8.2f} {rel:>7}")
            if "auto_vs_plain" in r:
                print(f"  auto/plain {r['auto_vs_plain']:.3f} (target <= 1.00, "
                      f"+{STEADY_NOISE:.0%} for noise): {met(r['target']['met'])}")
        elif name == "fairness":
            print(f"\nfairness: uid {r['uid_a']} (A) {r['jobs_a']} jobs, uid {r['uid_b']} (B) "
                  f"{r['jobs_b']} job, {r['ws_mib']} MiB each, {r['duration_s']:.0f} s; passes "
                  f"counted while all ran")
            print(f"  {'config':8} {'window s':>8} {'A passes':>9} {'B passes':>9} {'A share':>8} "
                  f"{'B share':>8} {'B halves':>13} {'GPU vs solo':>11} {'B held (daemon)':>15}")
            for k, v in c.items():
                if failed_row(k, v, 8):
                    continue
                h = " / ".join("-" if x is None else f"{x:.0%}" for x in v["share_b_halves"])
                print(f"  {k:8} {v['window_s']:8.1f} {v['passes_a']:9.0f} {v['passes_b']:9.0f} "
                      f"{pct(v['share_a']):>8} {pct(v['share_b']):>8} {h:>13} "
                      f"{v['throughput_vs_solo']:11.2f} {pct(v.get('daemon_held_share_b')):>15}")
            if "target" in r:
                print(f"  auto: B {pct(c['auto']['share_b'])} (target 50 % +- 10 %): "
                      f"{met(r['target']['met'])}")

def run_scenarios(b, only, method, note=""):
    """Runs each scenario named in `only` (method(name)()) on bench b, one
    after the other: a failed scenario is recorded and the next one runs;
    SIGTERM, SIGHUP and SIGINT stop the run, ending every process started.
    Writes the figures after each. Returns (failed, start time)."""
    def on_signal(signum, frame):
        raise Stop(f"signal {signum}")

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    failed = False
    current = None
    t_start = time.monotonic()
    try:
        smi = shutil.which("nvidia-smi")
        if smi:
            try:
                q = subprocess.run([smi, "--query-gpu=name,memory.total,memory.used,driver_version",
                                    "--format=csv,noheader"], capture_output=True, text=True,
                                   timeout=30).stdout.strip()
                b.results["setup"]["gpus"] = q.splitlines()
                print(f"GPU: {q}", flush=True)
            except Exception as e:
                print(f"nvidia-smi: {e}", flush=True)
        print(f"work directory {b.wd}; {'quick' if b.a.quick else 'full'} run of "
              f"{', '.join(only)}{note}", flush=True)
        for name in only:
            t0 = time.monotonic()
            current = name
            try:
                method(name)()
            except Exception as e:  # the next scenario still runs
                failed = True
                b.results["scenarios"].setdefault(name, {})["error"] = f"{type(e).__name__}: {e}"
                if not isinstance(e, BenchError):
                    traceback.print_exc()
                print(f"  {name} FAILED: {e}", flush=True)
            finally:
                b.kill_all()
                b.results["scenarios"].setdefault(name, {})["elapsed_s"] = time.monotonic() - t0
                b.write()
            print(f"  ({name}: {time.monotonic() - t0:.0f} s)", flush=True)
    except (KeyboardInterrupt, Stop) as e:
        failed = True
        if current:
            b.results["scenarios"].setdefault(current, {})["error"] = f"interrupted ({e})"
        print(f"interrupted ({e or 'SIGINT'}): stopping the jobs", file=sys.stderr, flush=True)
    finally:
        b.kill_all()
        b.results["setup"]["elapsed_s"] = time.monotonic() - t_start
        b.write()
    return failed, t_start


def finish(b, failed, t_start):
    """The closing lines; the work directory is kept when asked or when
    something failed. Returns the exit status."""
    print(f"\n{time.monotonic() - t_start:.0f} s in all; figures in {b.a.out}")
    if b.a.keep_workdir or failed or b.failures:
        print(f"job outputs and nvshared logs kept in {b.wd}")
    else:
        shutil.rmtree(b.wd, ignore_errors=True)
    return 1 if failed or b.failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    for k in ("nvshared", "nvsharectl", "lib", "job"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--only", default=",".join(SCENARIOS),
                    help="scenarios, comma-separated (default: all)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny sizes and times: checks the bench and the machine in about a minute")
    ap.add_argument("--out", default="policy_bench.json")
    ap.add_argument("--on-quantum", default="2s", help="the `on` configuration's --time-quantum")
    ap.add_argument("--nvshared-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for every nvshared started (repeatable)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="one more environment variable for every job (repeatable)")
    ap.add_argument("--uid-a", type=int, default=1001, help="fairness: user A (gid the same)")
    ap.add_argument("--uid-b", type=int, default=1002, help="fairness: user B (gid the same)")
    ap.add_argument("--inter-limit-s", type=float, default=None,
                    help="interactive: the most one run of the interactive job may take; "
                    "stopped there, its bursts so far and the one it is in count "
                    "(default: twice its time alone + 10 s, 38 s in the full run)")
    ap.add_argument("--max-concurrent-gib", type=float, default=40,
                    help="refuse a scenario whose jobs together allocate more")
    ap.add_argument("--keep-workdir", action="store_true",
                    help="keep the temporary directory (job outputs, nvshared logs)")
    ap.add_argument("--verbose", action="store_true", help="print every command started")
    for k, v in FULL.items():
        ap.add_argument("--" + k.replace("_", "-"), type=type(v), default=None,
                        help=f"default {v} ({QUICK[k]} with --quick)")
    a = ap.parse_args()
    for kv in a.env:
        if "=" not in kv:
            ap.error(f"--env {kv}: NAME=VALUE expected")
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenario(s) {bad}; known: {', '.join(SCENARIOS)}")
    for k in ("nvshared", "nvsharectl", "lib", "job"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
        if not os.path.isfile(getattr(a, k)):
            ap.error(f"--{k} {getattr(a, k)}: no such file")
    defaults = QUICK if a.quick else FULL
    p = {k: (getattr(a, k) if getattr(a, k) is not None else v) for k, v in defaults.items()}

    b = Bench(a, p)
    failed, t_start = run_scenarios(b, only, lambda name: getattr(b, name))
    print_tables(b.results)
    return finish(b, failed, t_start)


if __name__ == "__main__":
    sys.exit(main())
