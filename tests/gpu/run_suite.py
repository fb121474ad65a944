#!/usr/bin/env python3
"""The gpu suite: real CUDA programs under nvshared on a real GPU.

Each scenario starts nvshared on a private socket, runs two (or more)
programs at once with libnvshare.so preloaded, and checks (1) that every
program's results are right (gpu_work verifies its data; train.py's loss must
equal a run without nvshare) and (2) from the GPU's own clock (%globaltimer,
recorded by gpu_work's kernels) that the two processes' kernels never
overlapped when nvshare serializes, and did overlap when it lets them run
together.

Safety: every program's memory is small (a few hundred MiB); oversubscription
is emulated with --capacity far below the card's real memory.

Usage: run_suite.py --nvshared BIN --lib LIBNVSHARE --work BIN --work-ptds BIN
                    --train train.py [--only NAME] [--out DIR]
Exit status 0 when every scenario passed; one line per scenario on stdout.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

MAGIC, VERSION = 0x4853564E, 1
STATUS_QUERY, STATUS = 5, 22


def query_status(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(path)
    s.sendall(struct.pack("<IHHII", MAGIC, VERSION, STATUS_QUERY, 0, 0))
    head = b""
    while len(head) < 16:
        head += s.recv(16 - len(head))
    _, _, typ, length, _ = struct.unpack("<IHHII", head)
    body = b""
    while len(body) < length:
        body += s.recv(length - len(body))
    s.close()
    assert typ == STATUS, typ
    return json.loads(body)


class Daemon:
    def __init__(self, binary, workdir, args, prefix=()):
        self.sock = os.path.join(workdir, "nvshare.sock")
        self.log = open(os.path.join(workdir, "nvshared.log"), "w")
        # Its own state (rates.json, state.json), never the machine's.
        state = [] if "--state-dir" in args else ["--state-dir",
                                                  os.path.join(workdir, "state")]
        self.proc = subprocess.Popen(list(prefix) + [binary, "--socket", self.sock, "-v"] +
                                     state + args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                query_status(self.sock)
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nvshared did not come up")

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=10)
        self.log.close()
        return rc


def finish(procs, timeout):
    """(exit status, output) of each process; killed if it runs past timeout."""
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out = (out or "") + "\n<timed out>"
        outs.append((p.returncode, out))
    return outs


def programs_failed(outs):
    """None if every gpu_work run verified its results, else what they printed."""
    if all(code == 0 and "RESULT OK" in out for code, out in outs):
        return None
    return "program failed: " + " | ".join(out.strip()[-300:] for _, out in outs)


def gpu_memory_bytes():
    """GPU 0's memory, as nvidia-smi reports it."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits",
                          "-i", "0"], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) << 20


def max_chunk_for(memory):
    """The swap engine's largest chunk on a GPU of `memory` bytes
    (swap_plan::max_chunk_for): 512 MiB from 64 GiB on, else 64 MiB."""
    return (512 << 20) if memory // 128 >= (512 << 20) else (64 << 20)


def overlaps(a, b):
    """Pairs of [start, end] intervals from a and b that intersect."""
    return sum(1 for s1, e1 in a for s2, e2 in b if s1 < e2 and s2 < e1)


def read_intervals(path):
    out = []
    with open(path) as f:
        for line in f:
            _, start, end = line.split()
            out.append((int(start), int(end)))
    return out


class Runner:
    def __init__(self, args):
        self.a = args
        self.results = []
        self.baseline_loss = None

    def env(self, sock, preload=True, extra=None):
        e = dict(os.environ)
        if preload:
            e["LD_PRELOAD"] = self.a.lib
            e["NVSHARE_SOCKET"] = sock
        e.update(extra or {})
        return e

    def run_all(self, procs, timeout):
        return finish(procs, timeout)

    def record(self, name, ok, detail):
        self.results.append((name, ok, detail))
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)

    def work_pair(self, name, daemon_args, expect_overlap, work_args, binaries=None,
                  timeout=120):
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, daemon_args)
            binaries = binaries or [self.a.work, self.a.work]
            t0 = time.time()
            started = [self.start_work(d.sock, wd, str(i), work_args, binary=b)
                       for i, b in enumerate(binaries)]
            procs, logs = [p for p, _ in started], [log for _, log in started]
            peak_mem, peak_clients, serializing = 0, 0, False
            while any(p.poll() is None for p in procs) and time.time() - t0 < timeout:
                try:
                    st = query_status(d.sock)
                    peak_clients = max(peak_clients, len(st["clients"]))
                    for g in st["gpus"]:
                        peak_mem = max(peak_mem, g["requested_memory"])
                        serializing |= g["serializing"]
                except OSError:
                    pass
                time.sleep(0.1)
            outs = self.run_all(procs, timeout)
            elapsed = time.time() - t0
            rc = d.stop()
            detail = f"{elapsed:.1f}s"
            failed = programs_failed(outs)
            if failed:
                detail += " " + failed
                with open(os.path.join(wd, "nvshared.log")) as f:
                    detail += " | daemon: " + f.read()[-600:]
                self.record(name, False, detail)
                return
            iv = [read_intervals(l) for l in logs]
            span = [(min(s for s, _ in x), max(e for _, e in x)) for x in iv]
            concurrent_runs = span[0][0] < span[1][1] and span[1][0] < span[0][1]
            n_overlap = overlaps(iv[0], iv[1])
            detail += (f", kernels overlapping across processes: {n_overlap} of "
                       f"{len(iv[0])}x{len(iv[1])}, runs concurrent: {concurrent_runs}, "
                       f"peak clients {peak_clients}, peak reported memory "
                       f"{peak_mem >> 20} MiB, serialized: {serializing}, daemon exit {rc}")
            good = (rc == 0 and concurrent_runs and peak_clients >= 2 and peak_mem > 0 and
                    ((n_overlap > 0) if expect_overlap else (n_overlap == 0)))
            self.record(name, good, detail)

    def start_work(self, sock, wd, tag, args, extra_env=None, binary=None):
        """A gpu_work process logging its kernels' intervals: (process, log path)."""
        log = os.path.join(wd, f"iv-{tag}.txt")
        p = subprocess.Popen([binary or self.a.work, "--log", log] + args,
                             env=self.env(sock, extra=extra_env), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        return p, log

    # ---- switching (issue 6): what moves, and when the lock changes hands ----

    def watch(self, sock, procs, timeout):
        """Polls nvshared until the processes end: the latest status of each client,
        with the most memory it was seen to have (it frees all before it exits)."""
        last, peak, t0 = {}, {}, time.time()
        while any(p.poll() is None for p in procs) and time.time() - t0 < timeout:
            try:
                for c in query_status(sock)["clients"]:
                    last[c["pid"]] = c
                    peak[c["pid"]] = max(peak.get(c["pid"], 0), c["memory"])
            except OSError:
                pass
            time.sleep(0.05)
        for pid, c in last.items():
            c["peak_memory"] = peak[pid]
        return last

    def start_holding(self, name, d, wd, bursts):
        """A busy holder of 50 ms bursts that never lets go early; None (the
        scenario recorded as failed) if it never gets the GPU."""
        holder, _ = self.start_work(d.sock, wd, "holder",
                                    ["--bursts", str(bursts), "--burst-us", "50000", "--gap-us",
                                     "0", "--mem-mib", "64"], {"NVSHARE_IDLE_RELEASE_MS": "0"})
        if self.wait_holding(d.sock, holder):
            return holder
        holder.kill()
        d.stop()
        self.record(name, False, "the holder never held the GPU")
        return None

    def wait_holding(self, sock, proc, timeout=60):
        t0 = time.time()
        while time.time() - t0 < timeout and proc.poll() is None:
            try:
                if any(c["pid"] == proc.pid and c["state"] == "holding" and c["grants"] >= 1
                       for c in query_status(sock)["clients"]):
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def switch_scenario(self, name, daemon_args, first, second, check, env_first=None,
                        stagger=True, timeout=120):
        """Runs `first`, then (once it holds the GPU, if stagger) `second`; check(iv_first,
        iv_second, status_first, status_second) returns (ok, detail)."""
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, daemon_args)
            p1, log1 = self.start_work(d.sock, wd, "first", first, env_first)
            if stagger and not self.wait_holding(d.sock, p1):
                p1.kill()
                d.stop()
                self.record(name, False, "the first process never held the GPU")
                return
            p2, log2 = self.start_work(d.sock, wd, "second", second)
            last = self.watch(d.sock, [p1, p2], timeout)
            outs = self.run_all([p1, p2], timeout)
            rc = d.stop()
            failed = programs_failed(outs)
            if failed:
                self.record(name, False, failed)
                return
            ok, detail = check(read_intervals(log1), read_intervals(log2), last.get(p1.pid, {}),
                               last.get(p2.pid, {}))
            self.record(name, ok and rc == 0, detail + f", daemon exit {rc}")

    def switching_scenarios(self):
        mib = 1 << 20

        # Oversubscribed (2 x 1 GiB on a capacity of 1.5 GiB): each release
        # evicts only what does not fit beside the other process (the swap
        # engine leaves a 32nd of the capacity for contexts and moves whole
        # chunks: at most one more), and the evicted data comes back in bulk.
        chunk = max_chunk_for(gpu_memory_bytes())

        def partial(iv1, iv2, s1, s2):
            cap = 1536 * mib
            per = []
            ok = overlaps(iv1, iv2) == 0
            for me, other in ((s1, s2), (s2, s1)):
                if me.get("swap_outs", 0) == 0:
                    continue
                expect = me["peak_memory"] - (cap - other["peak_memory"])
                got = me["bytes_evicted"] / me["swap_outs"]
                per.append(f"{got / mib:.1f} MiB per eviction (expected {expect / mib:.1f})")
                slack = cap // 32 + chunk
                ok &= expect - 4 * mib <= got <= expect + slack and me["swap_ins"] >= 1
            ok &= len(per) == 2
            return ok, (f"kernel overlaps {overlaps(iv1, iv2)}; " + "; ".join(per) +
                        f"; swap-ins {s1.get('swap_ins')}/{s2.get('swap_ins')}")

        bursty = ["--bursts", "6", "--burst-us", "40000", "--gap-us", "300000", "--mem-mib", "1024"]
        self.switch_scenario("switch-evicts-only-the-excess",
                             ["--anti-thrashing", "auto", "--capacity", "1536M"], bursty, bursty,
                             partial, stagger=False)

        # Pauses of 10 ms on an oversubscribed GPU where a switch would move
        # 2 GiB each way (about 40 ms at the bus's speed, out and back
        # overlapping the other's copies): the holder keeps the GPU through
        # them.
        def held(iv1, iv2, s1, s2):
            last1 = max(e for _, e in iv1)
            first2 = min(st for st, _ in iv2)
            ok = first2 > last1 and s1.get("drops") == 0 and s1.get("swap_outs") == 0
            return ok, (f"second's first kernel {(first2 - last1) / 1e6:+.1f} ms after the "
                        f"first's last; first: drops {s1.get('drops')}, evictions "
                        f"{s1.get('swap_outs')}")

        self.switch_scenario(
            "switch-holds-through-short-pauses",
            ["--anti-thrashing", "auto", "--capacity", "4096M"],
            ["--bursts", "15", "--burst-us", "40000", "--gap-us", "10000", "--mem-mib", "3072"],
            ["--bursts", "2", "--burst-us", "40000", "--gap-us", "0", "--mem-mib", "3072"], held)

        # A process whose pauses (700 ms) proved long hands the GPU to a busy
        # one at once: its first pause costs the idle period (120 ms).
        def at_once(iv1, iv2, s1, s2):
            handoff = []
            for _, end in sorted(iv1)[:-1]:
                nxt = [st for st, _ in iv2 if st >= end]
                handoff.append((min(nxt) - end) / 1e6 if nxt else float("inf"))
            ok = (len(handoff) == 3 and handoff[0] >= 110 and max(handoff[1:]) < 60 and
                  overlaps(iv1, iv2) == 0)
            return ok, "handoffs after each pause: " + ", ".join(f"{h:.1f} ms" for h in handoff)

        self.switch_scenario(
            "switch-hands-over-at-once-after-long-pauses",
            ["--anti-thrashing", "on", "--time-quantum", "600ms"],
            ["--bursts", "4", "--burst-us", "300000", "--gap-us", "700000", "--mem-mib", "256"],
            ["--bursts", "300", "--burst-us", "30000", "--gap-us", "0", "--mem-mib", "256"],
            at_once, env_first={"NVSHARE_IDLE_RELEASE_MS": "120"})

    def rates_relayed(self):
        """Two processes taking turns with 1.1 GiB each way (NVSHARE_EVICT=1: all of it at
        every release) report the rates they measured; nvshared shows them and hands them to
        a third process, which logs them (issue 44: rates measured, not assumed)."""
        name = "rates-measured-and-relayed"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "2s"])
            args = ["--bursts", "6", "--burst-us", "40000", "--gap-us", "300000",
                    "--mem-mib", "1152"]
            pair = [self.start_work(d.sock, wd, str(i), args, extra_env={"NVSHARE_EVICT": "1"})
                    for i in range(2)]
            failed = programs_failed(self.run_all([p for p, _ in pair], 180))
            used = [g for g in query_status(d.sock)["gpus"] if g["grants"] > 0]
            rates = used[0]["rates"] if used else {}
            third, _ = self.start_work(d.sock, wd, "third",
                                       ["--bursts", "1", "--burst-us", "1000", "--gap-us", "0",
                                        "--mem-mib", "64"], extra_env={"NVSHARE_DEBUG": "1"})
            outs3 = self.run_all([third], 60)
            rc = d.stop()
            gbs = {k: v / 1e9 for k, v in rates.items()}
            told = "rates earlier processes measured on GPU" in outs3[0][1]
            # A copy over PCIe or NVLink-C2C: well above 1 GB/s, below 1 TB/s.
            plausible = all(1e9 <= rates.get(k, 0) <= 1e12 for k in ("engine_out", "engine_in"))
            ok = (failed is None and programs_failed(outs3) is None and rc == 0 and plausible
                  and told)
            detail = (", ".join(f"{k} {v:.1f} GB/s" for k, v in sorted(gbs.items())) +
                      f"; third process told: {told}; daemon exit {rc}")
            if failed:
                detail += "; " + failed
            self.record(name, ok, detail)

    # ---- the library under the driver (issue 20) ----

    def client_of(self, sock, pid):
        try:
            return next((c for c in query_status(sock)["clients"] if c["pid"] == pid), None)
        except OSError:
            return None

    def edge(self, sock, args, extra_env=None):
        return subprocess.Popen([self.a.edge] + args, env=self.env(sock, extra=extra_env),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_file(self, path, proc, timeout=60):
        t0 = time.time()
        while not os.path.exists(path) and proc.poll() is None and time.time() - t0 < timeout:
            time.sleep(0.01)
        return os.path.exists(path)

    def drain_waits_on_later_write(self):
        """A drop comes while a queued kernel waits for a flag that the process
        writes only later: the writer must pass the gate after the grace, and the
        process must finish (before the fix it hung for good)."""
        name = "drain-waits-on-later-write"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "200ms",
                                             "--grace", "1s"])
            ready, go = os.path.join(wd, "ready"), os.path.join(wd, "go")
            a = self.edge(d.sock, ["--mode", "flag-wait", "--ready", ready, "--go", go],
                          {"NVSHARE_IDLE_RELEASE_MS": "0"})
            if not self.wait_file(ready, a):
                a.kill()
                d.stop()
                self.record(name, False, "never queued the wait: " + a.communicate()[0][-500:])
                return
            b, _ = self.start_work(d.sock, wd, "b", ["--bursts", "3", "--burst-us", "20000",
                                                     "--gap-us", "0", "--mem-mib", "64"])
            t0 = time.time()
            dropped = False
            while time.time() - t0 < 30 and not dropped:
                c = self.client_of(d.sock, a.pid)
                dropped = c is not None and c.get("drops", 0) >= 1
                time.sleep(0.02)
            time.sleep(0.2)  # the drain is under way, stuck on the wait
            open(go, "w").close()
            outs = self.run_all([a, b], 90)
            rc = d.stop()
            failed = programs_failed([(outs[1][0], outs[1][1])])
            ok = (dropped and outs[0][0] == 0 and "RESULT OK" in outs[0][1] and not failed and
                  rc == 0)
            self.record(name, ok, f"dropped {dropped}, flag-wait exit {outs[0][0]}, other "
                                  f"{failed or 'ok'}, daemon exit {rc}" +
                        ("" if ok else " | " + outs[0][1][-500:]))

    def free_during_capture(self):
        """Issue 43: cudaFree of memory that queued work still uses, while another
        stream captures (no synchronisation allowed): the work must run without an
        error, with and without the library (the reference)."""
        name = "free-during-capture"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on"])
            plain = subprocess.run([self.a.edge, "--mode", "free-during-capture"],
                                   env=self.env(d.sock, preload=False), capture_output=True,
                                   text=True, timeout=120)
            shared = self.edge(d.sock, ["--mode", "free-during-capture"])
            out = self.run_all([shared], 120)[0]
            rc = d.stop()
            ok = out[0] == 0 and "RESULT OK" in out[1] and rc == 0
            self.record(name, ok, f"with the library: exit {out[0]}; without: exit "
                                  f"{plain.returncode}; daemon exit {rc}" +
                        ("" if ok else " | " + out[1][-500:] + plain.stdout[-200:] +
                         plain.stderr[-200:]))

    def same_answers(self, name, mode, marker, expect):
        """gpu_edge --mode MODE with the library and without it: the RESULT
        line after `marker` is the same, and holds each string of `expect`."""
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "auto"])
            plain = subprocess.run([self.a.edge, "--mode", mode],
                                   env=self.env(d.sock, preload=False), capture_output=True,
                                   text=True, timeout=120)
            shared = self.edge(d.sock, ["--mode", mode])
            out = self.run_all([shared], 120)[0]
            rc = d.stop()

            def answer(text):
                lines = [l for l in text.splitlines() if "RESULT OK " + marker in l]
                return lines[-1].split("RESULT OK ", 1)[1] if lines else None

            want = answer(plain.stdout)
            ok = (out[0] == 0 and want is not None and answer(out[1]) == want and
                  all(e in want for e in expect) and rc == 0)
            self.record(name, ok, f"without: {want!r}; with: {answer(out[1])!r}; daemon exit {rc}" +
                        ("" if ok else " | " + out[1][-500:] + plain.stderr[-200:]))

    def native_answers(self):
        """Issue 43, item 7: what the driver says of a cudaMalloc buffer (pointer
        attributes) and cudaFreeAsync of it are the same with the library (the
        swap engine's memory) as without it."""
        self.same_answers("native-answers", "native-answers", "native",
                          ["ctx=same", "id-stable=1"])

    def fault_then_alloc(self):
        """Issue 43, item 7: after an illegal address, cudaMalloc fails with the
        sticky error with the library as without it (not out of memory), and
        cudaFree of memory made before the fault answers as it does without."""
        self.same_answers("fault-then-alloc", "fault-then-alloc", "fault", ["sync=700"])

    def driver_errors(self):
        """Issue 43, item 7, on the real driver: a cuMemCreate, cuMemMap or
        cuMemSetAccess that fails (fail_driver.c, standing in as libcuda.so.1,
        fails the next one once) while an allocation made while the process
        holds the GPU places its memory is that allocation's answer, and the
        next allocation works; one that fails while the memory of an
        allocation made before the grant is placed at the grant is survived
        (placed as on a full GPU). Every allocation that succeeded holds its
        data, and nothing leaks."""
        name = "driver-errors"
        if not self.a.fail_driver:
            self.record(name, False, "no --fail-driver (fail_driver.c's library)")
            return
        found = re.search(r"libcuda\.so\.1 \(libc6,x86-64\) => (\S+)",
                          subprocess.run(["ldconfig", "-p"], capture_output=True,
                                         text=True).stdout)
        if not found:
            self.record(name, False, "the host's libcuda.so.1 is not in ldconfig's cache")
            return
        details, ok = [], True
        for call in ("cuMemCreate", "cuMemMap", "cuMemSetAccess"):
            with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
                os.symlink(self.a.fail_driver, os.path.join(wd, "libcuda.so.1"))
                os.symlink(found.group(1), os.path.join(wd, "libnvshare-real-cuda.so.1"))
                d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "auto"])
                path = wd + ":" + os.environ.get("LD_LIBRARY_PATH", "")
                p = self.edge(d.sock, ["--mode", "driver-error", "--call", call],
                              {"LD_LIBRARY_PATH": path})
                out = self.run_all([p], 120)[0]
                rc = d.stop()
            m = re.search(r"RESULT OK driver-error call=\S+ early=(-?\d+) early-wrong=(\d+) "
                          r"held=(-?\d+) next=(-?\d+) next-wrong=(\d+) "
                          r"free-change-mib=(-?\d+)", out[1])
            failed = out[1].count(f"fail_driver: {call} failed")
            this = (out[0] == 0 and rc == 0 and m is not None and failed == 2 and
                    m.group(1) == "0" and m.group(2) == "0" and m.group(3) == "999" and
                    m.group(4) == "0" and m.group(5) == "0" and abs(int(m.group(6))) < 128)
            ok &= this
            details.append(f"{call}: " + (m.group(0).split("RESULT OK ", 1)[1] if m else "no result")
                           + f" injected={failed} named={out[1].count('(CUDA error 999)')}" +
                           ("" if this else " | " + out[1][-600:]))
        self.record(name, ok, "; ".join(details))

    def graph_node_on_swapped_out(self):
        """Issue 43, item 7: a graph memset node made on a buffer that is swapped
        out (another process holds the oversubscribed GPU) is made once the
        GPU and the memory are back, and the graph writes the buffer."""
        name = "graph-node-on-swapped-out"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "auto", "--capacity", "1G"])
            ready, go = os.path.join(wd, "ready"), os.path.join(wd, "go")
            a = self.edge(d.sock, ["--mode", "graph-node", "--alloc-mib", "700", "--ready", ready,
                                   "--go", go],
                          {"NVSHARE_IDLE_RELEASE_MS": "1", "NVSHARE_DEBUG": "1"})
            holding = False
            if self.wait_file(ready, a):
                holder, _ = self.start_work(d.sock, wd, "holder",
                                            ["--bursts", "40", "--burst-us", "50000", "--gap-us",
                                             "0", "--mem-mib", "700"],
                                            {"NVSHARE_IDLE_RELEASE_MS": "0"})
                holding = self.wait_holding(d.sock, holder)
                time.sleep(0.5)  # a's swap-out follows its release
            open(go, "w").close()
            out = self.run_all([a], 120)[0]
            if holding:
                self.run_all([holder], 120)
            rc = d.stop()
            swapped = "swapped out " in out[1]
            ok = (out[0] == 0 and holding and swapped and
                  "RESULT OK graph node=0 run=0 byte=5a" in out[1] and rc == 0)
            self.record(name, ok, f"holder held: {holding}; swapped out: {swapped}; " +
                        " ".join(l for l in out[1].splitlines() if "RESULT" in l) +
                        ("" if ok else " | " + out[1][-800:]))

    def allocation_waits_until_mapped(self):
        """Issue 43, item 1: no allocation returns memory with nothing mapped
        behind it. While another process holds the GPU (mode on), gpu_edge
        allocates and at once sets the memory by the driver's own
        cuMemsetD8_v2, found in libcuda's symbol table (no hook sees it, as
        with a tool's trampoline): the allocation waited for the grant, so
        the memset finds the memory mapped (before: an unmapped address)."""
        name = "allocation-waits-until-mapped"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "10min"])
            holder = self.start_holding(name, d, wd, 40)
            if holder is None:
                return
            out = self.run_all([self.edge(d.sock, ["--mode", "escape", "--alloc-mib", "256"])],
                               120)[0]
            self.run_all([holder], 120)
            rc = d.stop()
            line = [l for l in out[1].splitlines() if "RESULT OK escape" in l]
            ok = (out[0] == 0 and bool(line) and "memset=0 sync=0" in line[0] and rc == 0)
            self.record(name, ok, (line[0] if line else "no result") + f", daemon exit {rc}" +
                        ("" if ok else " | " + out[1][-600:]))

    def revoked_work_keeps_its_memory(self):
        """Issue 43, item 4: a holder whose one long kernel adds to every word of
        its memory is revoked mid-kernel (its drain cannot end within the grace),
        and the next holder's growth asks it for room: its memory moves only once
        the kernel has ended, so the kernel neither faults nor loses a pass."""
        name = "revoked-work-keeps-its-memory"
        total = gpu_memory_bytes()
        mib = (total * 55 // 100) >> 20
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "200ms",
                                             "--grace", "1s"])
            ready = os.path.join(wd, "ready")
            a = self.edge(d.sock, ["--mode", "long-touch", "--alloc-mib", str(mib), "--burst-us",
                                   "8000000", "--ready", ready])
            if not self.wait_file(ready, a, timeout=120):
                a.kill()
                d.stop()
                self.record(name, False, "never launched its kernel: " + a.communicate()[0][-500:])
                return
            b, _ = self.start_work(d.sock, wd, "b", ["--bursts", "2", "--burst-us", "20000",
                                                     "--gap-us", "0", "--mem-mib", str(mib)])
            outs = self.run_all([a, b], 240)
            rc = d.stop()
            with open(os.path.join(wd, "nvshared.log")) as f:
                revoked = "revoked the lock" in f.read()
            failed = programs_failed([(outs[1][0], outs[1][1])])
            line = [l for l in outs[0][1].splitlines() if "RESULT OK long-touch" in l]
            ok = (revoked and outs[0][0] == 0 and bool(line) and line[0].endswith(" wrong=0") and
                  not failed and rc == 0)
            if not ok:
                with open(os.path.join(self.a.out, name + ".log"), "w") as f:
                    f.write(outs[0][1] + "\n---- the next holder ----\n" + outs[1][1])
            self.record(name, ok, f"{mib} MiB each; revoked mid-kernel: {revoked}; " +
                        (line[0] if line else f"long-touch exit {outs[0][0]}") +
                        f"; other {failed or 'ok'}; daemon exit {rc}" +
                        ("" if ok else " | " + outs[0][1][-800:]))

    def nvml_memory(self):
        """Issue 47: nvshared takes each listed GPU's memory size from NVML at
        start, before any client has named it: the status shows what nvidia-smi
        says (total less reserved), before and after a client. (A lying client: the integration
        suite's Untrusted.AClaimChangesNothingOfTheSizeTheHostReports.)"""
        name = "nvml-memory"
        # What CUDA reports as the total: memory.total less what the driver
        # reserves for itself (NVML's v2 memory figures: hundreds of MiB).
        smi = subprocess.run(["nvidia-smi", "--query-gpu=uuid,memory.total,memory.reserved",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True)
        want = {f[0].strip(): int(f[1]) - int(f[2]) for f in
                (l.split(",") for l in smi.stdout.splitlines()) if len(f) == 3}
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "auto"])
            before = {g["uuid"]: g["physical_memory"] >> 20 for g in query_status(d.sock)["gpus"]}
            out = self.run_all([self.edge(d.sock, ["--mode", "meminfo"])], 60)[0]
            after = {g["uuid"]: g["physical_memory"] >> 20 for g in query_status(d.sock)["gpus"]}
            rc = d.stop()
            with open(os.path.join(wd, "nvshared.log")) as f:
                logged = "memory from NVML" in f.read()
            ok = (logged and want and before == want and after == want and out[0] == 0 and
                  rc == 0)
            self.record(name, ok, f"nvidia-smi MiB {want}; nvshared at start {before}, after a "
                                  f"client {after}; logged {logged}; daemon exit {rc}")

    def nvml_confirms_pinned(self):
        """Issue 47: another user's pinned memory counts for others only as far
        as NVML confirms it. gpu_edge's accounting mode (1,120 MiB pinned: an
        array, graph memory, plain memory) run as nobody, an honest process:
        nvshared confirms all it reported within seconds, no more than
        nvidia-smi counts for its pid. nvshared runs as the unit runs
        it: root with no capability at all and no new privileges."""
        name = "nvml-confirms-pinned"
        # In /tmp: nobody must reach its ready file, and --out may lie under
        # a directory only root may enter (/root).
        with tempfile.TemporaryDirectory(prefix="nvshare-gpu-") as wd:
            os.chmod(wd, 0o777)
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "auto"],
                       ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"])
            ready, go = os.path.join(wd, "ready"), os.path.join(wd, "go")
            a = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                  self.a.edge, "--mode", "accounting", "--ready", ready, "--go",
                                  go, "--plain-mib", "1024"],
                                 env=self.env(d.sock, extra={"NVSHARE_MANAGED": "0"}),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            seen, smi = None, {}
            if self.wait_file(ready, a):
                t0 = time.time()
                while time.time() - t0 < 15 and a.poll() is None:
                    seen = self.client_of(d.sock, a.pid) or seen
                    if seen and seen["pinned_memory"] >= (1120 << 20) and \
                            seen["confirmed_pinned_memory"] >= seen["pinned_memory"]:
                        break
                    time.sleep(0.1)
                q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                    "--format=csv,noheader,nounits"], capture_output=True,
                                   text=True)
                smi = {int(f[0]): int(f[1]) << 20 for f in
                       (l.split(",") for l in q.stdout.splitlines()) if len(f) == 2}
            open(go, "w").close()
            out = a.communicate(timeout=60)[0]
            rc = d.stop()
            confirmed = seen["confirmed_pinned_memory"] if seen else 0
            pinned = seen["pinned_memory"] if seen else 0
            used = smi.get(a.pid, 0)
            ok = (a.returncode == 0 and rc == 0 and seen is not None and seen["uid"] == 65534 and
                  pinned >= (1120 << 20) and confirmed == pinned and confirmed <= used)
            self.record(name, ok, f"reported pinned {pinned >> 20} MiB, confirmed "
                                  f"{confirmed >> 20} MiB, nvidia-smi {used >> 20} MiB for pid "
                                  f"{a.pid} (all: {smi}); exit {a.returncode}, daemon {rc}" +
                        ("" if ok else " | " + out[-300:]))

    def nvml_confirms_swappable(self):
        """Issue 47: another user's swappable memory counts for others only as
        far as the host confirms it: NVML's count for the process while its
        memory is on the GPU, its resident anonymous memory (RssAnon, where
        swapped-out copies live) while it is not. Two honest processes as
        nobody, 3 GiB each on a capacity of 4 GiB, take turns for about 30 s;
        once every grace has run out (kClaimGrace, 15 s from the first turn)
        what each claims stays confirmed whole, swapped out or not, also where
        NVML alone (nvidia-smi, once a second) counts less than the claim."""
        name = "nvml-confirms-swappable"
        with tempfile.TemporaryDirectory(prefix="nvshare-gpu-") as wd:
            os.chmod(wd, 0o777)
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "auto", "--capacity", "4096M"],
                       ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"])
            args = ["--bursts", "60", "--burst-us", "40000", "--gap-us", "400000", "--mem-mib",
                    "3072"]
            procs = [subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534",
                                       "--clear-groups", self.a.work, "--log",
                                       os.path.join(wd, f"iv-{i}.txt")] + args,
                                      env=self.env(d.sock), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True) for i in range(2)]
            pids = {p.pid for p in procs}
            samples, granted, smi = [], {}, {}
            t0 = last_smi = time.time()
            while any(p.poll() is None for p in procs) and time.time() - t0 < 150:
                try:
                    clients = query_status(d.sock)["clients"]
                except OSError:
                    clients = []
                if time.time() - last_smi >= 1:  # what NVML alone counts for each pid
                    last_smi = time.time()
                    q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                        "--format=csv,noheader,nounits"], capture_output=True,
                                       text=True)
                    smi = {int(f[0]): int(f[1]) << 20 for f in
                           (l.split(",") for l in q.stdout.splitlines()) if len(f) == 2}
                now = time.time() - t0
                for c in clients:
                    if c["pid"] not in pids:
                        continue
                    if c["grants"] >= 1:
                        granted.setdefault(c["pid"], now)
                    c["nvml"] = smi.get(c["pid"])
                    samples.append((now, c))
                time.sleep(0.1)
            outs = self.run_all(procs, 60)
            rc = d.stop()
            failed = programs_failed(outs)
            # Every grace has ended 15 s after both were first granted; 1 s
            # more for the host's figures, read every second.
            settled = max(granted.values()) + 16 if len(granted) == 2 else float("inf")
            late = [c for t, c in samples if t >= settled and c["memory"] > 0]
            whole = [c for c in late if c["confirmed_memory"] >= c["memory"]]
            waiting = [c for c in whole if c["state"] != "holding" and c["swap_outs"] > 0]
            short = [c["confirmed_memory"] / c["memory"] for c in late
                     if c["confirmed_memory"] < c["memory"]]
            # Samples where NVML alone counts less than the claim: the host
            # memory holding swapped-out copies confirmed the rest.
            by_host = [c for c in waiting if c["nvml"] is not None and c["nvml"] < c["memory"]]
            evictions = {c["pid"]: c["swap_outs"] for _, c in samples}
            uids = {c["uid"] for _, c in samples}
            ok = (not failed and rc == 0 and uids == {65534} and len(late) >= 40 and
                  len(whole) >= 0.9 * len(late) and len(by_host) >= 5 and
                  len(evictions) == 2 and min(evictions.values()) >= 2)
            self.record(name, ok, f"{len(late)} samples after every grace ended: {len(whole)} "
                                  f"confirmed whole ({len(waiting)} of them waiting after a "
                                  f"swap-out, {len(by_host)} of those with NVML alone short of "
                                  f"the claim, lowest "
                                  f"{min((c['nvml'] / c['memory'] for c in by_host), default=1):.2f}"
                                  f"), {len(short)} short (lowest "
                                  f"{min(short, default=1):.2f} of the claim); swap-outs "
                                  f"{sorted(evictions.values())}; uids {sorted(uids)}; daemon "
                                  f"exit {rc}" + (" | " + failed if failed else ""))

    def contextless_stream_calls(self):
        """With no current context, a memset and a copy on an explicit stream
        wait for the lock that another process holds. The program allocates
        first (the allocation returns with the GPU, once the memory is
        mapped), then the holder takes the GPU while it idles."""
        name = "contextless-stream-calls"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "10min"])
            ready, go = os.path.join(wd, "ready"), os.path.join(wd, "go")
            b = self.edge(d.sock, ["--mode", "contextless", "--ready", ready, "--go", go])
            if not self.wait_file(ready, b):
                b.kill()
                d.stop()
                self.record(name, False, "the program never got ready")
                return
            holder = self.start_holding(name, d, wd, 100)
            open(go, "w").close()
            if holder is None:
                b.kill()
                return
            holder_out = holder.communicate(timeout=120)[0]
            out = b.communicate(timeout=120)[0]
            rc = d.stop()
            line = [l for l in out.splitlines() if "RESULT OK" in l]
            refused = bool(line) and "driver-refused" in line[0]
            waited = int(line[0].split()[-1]) if line and not refused else 0
            # The holder has 5 s of bursts and held the GPU before the calls
            # were made: calls let through unlocked return at once,
            # gated ones only once the holder lets go, seconds later.
            ok = (holder.returncode == 0 and b.returncode == 0 and bool(line) and
                  (refused or waited >= 1_000_000_000) and rc == 0)
            self.record(name, ok, (f"driver refused the calls: {line[0]}" if refused else
                                   f"the context-less calls waited {waited / 1e6:.0f} ms for "
                                   f"the lock") + f", daemon exit {rc}" +
                        ("" if ok else " | " + out[-400:] + holder_out[-200:]))

    def failed_capture_releases_early(self):
        """After a capture that ended in cudaErrorStreamCaptureUnjoined and a stream
        destroyed while capturing, the process still hands the GPU over in its
        pauses (before the fix it kept it for the whole quantum)."""
        name = "failed-capture-releases-early"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "10min"])
            log1 = os.path.join(wd, "iv-first.txt")
            first = self.edge(d.sock, ["--mode", "failed-captures", "--bursts", "6", "--burst-us",
                                       "40000", "--gap-us", "700000", "--log", log1])
            if not self.wait_holding(d.sock, first):
                first.kill()
                d.stop()
                self.record(name, False, "never held the GPU: " + first.communicate()[0][-500:])
                return
            second, log2 = self.start_work(d.sock, wd, "second",
                                           ["--bursts", "3", "--burst-us", "30000", "--gap-us",
                                            "0", "--mem-mib", "64"])
            outs = self.run_all([first, second], 120)
            rc = d.stop()
            if outs[0][0] != 0 or "RESULT OK" not in outs[0][1] or programs_failed([outs[1]]):
                self.record(name, False, outs[0][1][-500:] + outs[1][1][-300:])
                return
            iv1, iv2 = read_intervals(log1), read_intervals(log2)
            last1, first2 = max(e for _, e in iv1), min(st for st, _ in iv2)
            ok = first2 < last1 and overlaps(iv1, iv2) == 0 and rc == 0
            self.record(name, ok, f"the other's first kernel {(first2 - last1) / 1e6:+.0f} ms "
                                  f"after this one's last (negative: ran in a pause), kernel "
                                  f"overlaps {overlaps(iv1, iv2)}, daemon exit {rc}")

    def accounting_on_the_real_driver(self):
        """Arrays, graph memory and plain memory are counted as pinned, and another
        process's cudaMemGetInfo takes them off its free memory (issue 20)."""
        name = "accounting-and-meminfo"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "auto"])
            ready, go = os.path.join(wd, "ready"), os.path.join(wd, "go")
            a = self.edge(d.sock, ["--mode", "accounting", "--ready", ready, "--go", go,
                                   "--plain-mib", "1024"], {"NVSHARE_MANAGED": "0"})
            expected = (64 + 32 + 1024) << 20
            pinned, t0 = 0, time.time()
            if self.wait_file(ready, a):
                while time.time() - t0 < 15 and pinned < expected:
                    c = self.client_of(d.sock, a.pid)
                    pinned = c.get("pinned_memory", 0) if c else 0
                    time.sleep(0.05)
            time.sleep(0.5)  # the other's figure reaches nvshared, then b
            b = self.edge(d.sock, ["--mode", "meminfo"])
            out_b = b.communicate(timeout=120)[0]
            open(go, "w").close()
            out_a = a.communicate(timeout=60)[0]
            rc = d.stop()
            line = [l for l in out_b.splitlines() if "RESULT OK meminfo" in l]
            free, total = (int(x) for x in line[0].split()[-2:]) if line else (0, 0)
            # b's free memory: the capacity less its own 16 MiB and a's pinned memory.
            want = total - (16 << 20) - pinned
            ok = (a.returncode == 0 and b.returncode == 0 and rc == 0 and
                  expected <= pinned <= expected + (128 << 20) and bool(line) and
                  abs(free - want) <= (8 << 20))
            self.record(name, ok, f"pinned {pinned >> 20} MiB counted of {expected >> 20} MiB "
                                  f"(array 64, graph 32, plain 1024); the other's cudaMemGetInfo "
                                  f"free {free >> 20} MiB of {total >> 20}, expected "
                                  f"{want >> 20}; daemon exit {rc}" +
                        ("" if ok else " | " + out_a[-300:] + " | " + out_b[-300:]))

    def gpudirect_names_the_opt_out(self):
        """GPUDirect RDMA on a rewritten cudaMalloc buffer: the driver's answers pass
        through unchanged; where a path is lost that plain memory has (a run with
        NVSHARE_MANAGED=0 shows what plain memory gets), one line names the opt-out
        (issue 20)."""
        name = "gpudirect-names-the-opt-out"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "auto"])
            runs = {}
            for label, env in (("managed", {}), ("plain", {"NVSHARE_MANAGED": "0"})):
                p = self.edge(d.sock, ["--mode", "gpudirect"], env)
                out = p.communicate(timeout=120)[0]
                line = [l for l in out.splitlines() if "RESULT OK gpudirect" in l]
                runs[label] = (p.returncode, line[0].split("gpudirect ")[1] if line else None,
                               out.count("NVSHARE_MANAGED=0"))
            rc = d.stop()
            (mrc, managed, mwarn), (prc, plain, pwarn) = runs["managed"], runs["plain"]
            lost = managed != plain
            ok = (mrc == 0 and prc == 0 and rc == 0 and managed is not None and
                  plain is not None and pwarn == 0 and mwarn == (1 if lost else 0))
            self.record(name, ok, f"rewritten: {managed} ({mwarn} line naming the opt-out); "
                                  f"plain: {plain} ({pwarn}); daemon exit {rc}")

    # ---- containers (issue 17) ----

    def cdi_mounts_are_scheduled(self):
        """No container runtime here: a process started with exactly the
        mounts of `nvsharectl cdi generate`'s spec (unshare -m, bind mounts;
        no LD_PRELOAD, no NVSHARE_SOCKET) registers, waits for the lock a
        host process holds, then runs on the real GPU, never beside it."""
        name = "cdi-mounts-are-scheduled"
        if not self.a.ctl:
            self.record(name, False, "run with --ctl nvsharectl")
            return
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "10min"])
            spec_path = os.path.join(wd, "nvshare.json")
            gen = subprocess.run([self.a.ctl, "-s", d.sock, "cdi", "generate", "-o", spec_path,
                                  "--library", self.a.lib, "--preload-file",
                                  os.path.join(wd, "container-ld.so.preload")],
                                 capture_output=True, text=True, timeout=60)
            if gen.returncode != 0:
                self.record(name, False, f"nvsharectl cdi generate failed: {gen.stderr[-500:]}")
                d.stop()
                return
            with open(spec_path) as f:
                spec = json.load(f)
            names = [dev["name"] for dev in spec["devices"]]
            edits = next(dev["containerEdits"] for dev in spec["devices"] if dev["name"] == "all")
            mounts = edits.get("mounts", []) + spec.get("containerEdits", {}).get("mounts", [])
            env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "NVSHARE_SOCKET")}
            env.update(e.split("=", 1) for e in edits.get("env", []))
            holder = self.start_holding(name, d, wd, 40)
            if holder is None:
                return
            # A runtime creates missing mount targets; so does this (and
            # removes what it made).
            made = [m["containerPath"] for m in mounts if not os.path.exists(m["containerPath"])]
            setup = []
            for m in mounts:
                host, target = shlex.quote(m["hostPath"]), shlex.quote(m["containerPath"])
                make = f"mkdir -p {target}" if os.path.isdir(m["hostPath"]) else f"touch {target}"
                setup.append(f"[ -e {target} ] || {make}; mount --bind {host} {target}; "
                             f"mount -o remount,bind,ro {target}")
            log = os.path.join(wd, "iv-container.txt")
            c = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                  "set -e; " + "; ".join(setup) + '; exec "$@"', "sh",
                                  self.a.work, "--log", log, "--bursts", "2", "--burst-us",
                                  "10000", "--gap-us", "0", "--mem-mib", "64"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
            waiting = None
            t0 = time.time()
            while waiting is None and c.poll() is None and time.time() - t0 < 30:
                try:
                    waiting = next((x for x in query_status(d.sock)["clients"]
                                    if x["pid"] == c.pid and x["state"] == "waiting"), None)
                except OSError:
                    pass
                time.sleep(0.05)
            outs = self.run_all([holder, c], 120)
            rc = d.stop()
            for path in made:
                if os.path.isfile(path) and os.path.getsize(path) == 0:
                    os.remove(path)
            failed = programs_failed(outs)
            n_overlap = (overlaps(read_intervals(os.path.join(wd, "iv-holder.txt")),
                                  read_intervals(log)) if not failed else -1)
            ok = (gen.returncode == 0 and len(names) >= 3 and waiting is not None and
                  not failed and n_overlap == 0 and rc == 0)
            self.record(name, ok, f"spec devices {names}; mounts "
                                  f"{[m['containerPath'] for m in mounts]}; the mounted process "
                                  f"seen waiting: {waiting is not None} (cgroup "
                                  f"{(waiting or {}).get('cgroup')!r}, place "
                                  f"{(waiting or {}).get('queue_position')}); kernel overlaps "
                                  f"{n_overlap}; {failed or 'both ok'}; daemon exit {rc}" +
                        ("" if ok else " | " + gen.stderr[-300:] + outs[1][1][-300:]))

    # ---- users know what is happening (issue 16) ----

    def wait_notice_says_why(self):
        """A process queued behind a holder says on stderr, after
        NVSHARE_WAIT_NOTICE_MS, whom it waits for and why, then when it got the GPU."""
        name = "wait-notice-says-why"
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "10min"])
            holder = self.start_holding(name, d, wd, 40)
            if holder is None:
                return
            waiter, _ = self.start_work(d.sock, wd, "waiter",
                                        ["--bursts", "2", "--burst-us", "10000", "--gap-us", "0",
                                         "--mem-mib", "64"], {"NVSHARE_WAIT_NOTICE_MS": "500"})
            outs = self.run_all([holder, waiter], 120)
            rc = d.stop()
            lines = [l for l in outs[1][1].splitlines() if "[nvshare]" in l]
            waiting = [l for l in lines if "waiting for GPU" in l]
            got = [l for l in lines if "got GPU" in l]
            ok = (not programs_failed(outs) and rc == 0 and len(waiting) == 1 and len(got) == 1
                  and f"pid {holder.pid} " in waiting[0] and "mode on" in waiting[0]
                  and "1st in line" in waiting[0])
            self.record(name, ok, " | ".join(waiting + got) + f"; daemon exit {rc}" +
                        ("" if ok else " | " + outs[1][1][-400:]))

    # ---- one process, one nvshare (issue 18) ----

    def two_copies_act_as_one(self):
        """A process with two copies of the library (LD_PRELOAD of two paths, as a
        build under test on a host where nvshare is installed) registers once and
        takes turns with a one-copy process; it never waits for itself."""
        name = "two-copies-act-as-one"
        alt = ["--bursts", "6", "--burst-us", "40000", "--gap-us", "150000", "--mem-mib", "256"]
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            copy = os.path.join(wd, "libnvshare-copy.so")
            shutil.copy(self.a.lib, copy)
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "2s"])
            t0 = time.time()
            two, log2 = self.start_work(d.sock, wd, "two", alt, extra_env={
                "LD_PRELOAD": f"{self.a.lib}:{copy}", "NVSHARE_DEBUG": "1"})
            one, log1 = self.start_work(d.sock, wd, "one", alt)
            outs = self.run_all([two, one], 120)
            elapsed = time.time() - t0
            rc = d.stop()
            with open(os.path.join(wd, "nvshared.log")) as f:
                daemon_log = f.read()
            regs = sum(1 for line in daemon_log.splitlines()
                       if f"pid {two.pid} (" in line and "): registered as client" in line)
            failed = programs_failed(outs)
            n_overlap = overlaps(read_intervals(log2), read_intervals(log1)) if not failed else -1
            said = "another copy of libnvshare.so owns this process" in outs[0][1]
            # Two active copies waited for themselves until revoked (10 s).
            ok = (not failed and rc == 0 and regs == 1 and said and n_overlap == 0 and
                  elapsed < 8)
            self.record(name, ok, f"{elapsed:.1f}s, registrations of the two-copy process "
                                  f"{regs}, second copy said so: {said}, kernel overlaps "
                                  f"{n_overlap}, daemon exit {rc}" + (f" {failed}" if failed else ""))

    def train_baseline(self):
        p = subprocess.run([sys.executable, self.a.train], env=self.env("", preload=False),
                           capture_output=True, text=True, timeout=300)
        line = [l for l in p.stdout.splitlines() if "LOSS" in l]
        ok = p.returncode == 0 and line
        self.baseline_loss = line[0].split()[2] if ok else None
        self.record("train-baseline", bool(ok), (line[0] if ok else p.stderr[-500:]))

    def train_pair(self, name, daemon_args):
        if self.baseline_loss is None:
            self.record(name, False, "no baseline")
            return
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, daemon_args)
            t0 = time.time()
            barrier = os.path.join(wd, "go")
            procs = [subprocess.Popen([sys.executable, self.a.train, "--barrier", barrier],
                                      env=self.env(d.sock), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
                     for _ in range(2)]
            # Both set up before either trains, so that they compete.
            while (time.time() - t0 < 120 and any(p.poll() is None for p in procs) and
                   not all(os.path.exists(f"{barrier}.{p.pid}") for p in procs)):
                time.sleep(0.05)
            open(barrier, "w").close()
            peak_clients, grants = 0, 0
            while any(p.poll() is None for p in procs) and time.time() - t0 < 300:
                try:
                    st = query_status(d.sock)
                    peak_clients = max(peak_clients, len(st["clients"]))
                    grants = max(grants, sum(g["grants"] for g in st["gpus"]))
                except OSError:
                    pass
                time.sleep(0.1)
            outs = self.run_all(procs, 300)
            rc = d.stop()
            losses = []
            for code, out in outs:
                line = [l for l in out.splitlines() if "LOSS" in l]
                losses.append(line[0].split()[2] if code == 0 and line else None)
            ok = rc == 0 and all(l == self.baseline_loss for l in losses) and peak_clients >= 2
            self.record(name, ok, f"{time.time() - t0:.1f}s losses {losses} vs baseline "
                                  f"{self.baseline_loss}, peak clients {peak_clients}, "
                                  f"grants {grants}, daemon exit {rc}"
                        + ("" if ok else " | " + " | ".join(o[-300:] for _, o in outs)))


    def flag_across_full_gpu(self):
        """Issue 43: a queued wait for a flag that the process writes only after an
        allocation that finds the GPU full of another process's memory (idle, not
        holding: nvshared asks it for room). The drain before the room is made
        cannot end until the write: the process must neither hang nor fault on the
        allocation (before the fix: a hang in mode on), and keep its data."""
        name = "flag-across-full-gpu"
        total = gpu_memory_bytes()
        other_mib, alloc_mib = (total * 85 // 100) >> 20, (total * 25 // 100) >> 20
        with tempfile.TemporaryDirectory(dir=self.a.out) as wd:
            d = Daemon(self.a.nvshared, wd, ["--anti-thrashing", "on", "--time-quantum", "200ms"])
            b, _ = self.start_work(d.sock, wd, "b", ["--bursts", "2", "--burst-us", "20000",
                                                       "--gap-us", "15000000",
                                                       "--mem-mib", str(other_mib)])
            t0 = time.time()
            while b.poll() is None and time.time() - t0 < 120:  # its memory made, then idle
                c = self.client_of(d.sock, b.pid)
                if c is not None and c.get("memory", 0) >= (other_mib << 20) * 9 // 10:
                    break
                time.sleep(0.05)
            time.sleep(2)  # its first burst ran: it pauses, holding its memory on the GPU
            ready, go = os.path.join(wd, "ready"), os.path.join(wd, "go")
            open(go, "w").close()
            t1 = time.time()
            a = self.edge(d.sock, ["--mode", "flag-wait", "--ready", ready, "--go", go,
                                   "--alloc-mib", str(alloc_mib)], {"NVSHARE_DEBUG": "1"})
            outs = self.run_all([a, b], 180)
            took = time.time() - t1
            rc = d.stop()
            failed = programs_failed([(outs[1][0], outs[1][1])])
            stuck = "goes through unscheduled meanwhile" in outs[0][1]
            ok = outs[0][0] == 0 and "RESULT OK" in outs[0][1] and not failed and rc == 0
            self.record(name, ok, f"other {other_mib} MiB, allocation {alloc_mib} MiB, "
                                  f"flag-wait exit {outs[0][0]} after {took:.1f}s, let through a "
                                  f"stuck drain: {stuck}, other {failed or 'ok'}, daemon exit {rc}" +
                        ("" if ok else " | " + outs[0][1][-1500:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvshared", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--work-ptds", required=True)
    ap.add_argument("--edge", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--ctl", help="nvsharectl, for the container (CDI) scenario")
    ap.add_argument("--fail-driver", help="fail_driver.c's library, for driver-errors")
    ap.add_argument("--only")
    ap.add_argument("--out", default=tempfile.gettempdir())
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)  # scenarios make their folders inside it
    for arg in ("nvshared", "lib", "work", "work_ptds", "edge", "train", "ctl", "fail_driver"):
        if getattr(a, arg):  # a CDI spec names host paths, which must be absolute
            setattr(a, arg, os.path.abspath(getattr(a, arg)))
    r = Runner(a)
    # Bursts separated by CPU phases: serialized processes alternate by early
    # release; a continuous stream of bursts (gap 0) overlaps when unserialized.
    alt = ["--bursts", "6", "--burst-us", "40000", "--gap-us", "150000", "--mem-mib", "256"]
    busy = ["--bursts", "20", "--burst-us", "30000", "--gap-us", "0", "--mem-mib", "256"]
    scenarios = {
        "on-serializes": lambda: r.work_pair(
            "on-serializes", ["--anti-thrashing", "on", "--time-quantum", "2s"], False, alt),
        "on-serializes-ptds": lambda: r.work_pair(
            "on-serializes-ptds", ["--anti-thrashing", "on", "--time-quantum", "2s"], False, alt,
            [a.work_ptds, a.work_ptds]),
        "on-busy-takes-turns-at-tq": lambda: r.work_pair(
            "on-busy-takes-turns-at-tq", ["--anti-thrashing", "on", "--time-quantum", "200ms"],
            False, busy),
        "off-runs-together": lambda: r.work_pair(
            "off-runs-together", ["--anti-thrashing", "off"], True, busy),
        "auto-fits-runs-together": lambda: r.work_pair(
            "auto-fits-runs-together", ["--anti-thrashing", "auto"], True, busy),
        "auto-oversubscribed-serializes": lambda: r.work_pair(
            "auto-oversubscribed-serializes",
            ["--anti-thrashing", "auto", "--capacity", "384M", "--time-quantum", "200ms"],
            False, busy),
        "switch": r.switching_scenarios,
        "rates-measured-and-relayed": r.rates_relayed,
        "drain-waits-on-later-write": r.drain_waits_on_later_write,
        "flag-across-full-gpu": r.flag_across_full_gpu,
        "free-during-capture": r.free_during_capture,
        "native-answers": r.native_answers,
        "fault-then-alloc": r.fault_then_alloc,
        "driver-errors": r.driver_errors,
        "graph-node-on-swapped-out": r.graph_node_on_swapped_out,
        "allocation-waits-until-mapped": r.allocation_waits_until_mapped,
        "revoked-work-keeps-its-memory": r.revoked_work_keeps_its_memory,
        "nvml-memory": r.nvml_memory,
        "nvml-confirms-pinned": r.nvml_confirms_pinned,
        "nvml-confirms-swappable": r.nvml_confirms_swappable,
        "contextless-stream-calls": r.contextless_stream_calls,
        "failed-capture-releases-early": r.failed_capture_releases_early,
        "accounting-and-meminfo": r.accounting_on_the_real_driver,
        "gpudirect-names-the-opt-out": r.gpudirect_names_the_opt_out,
        "two-copies-act-as-one": r.two_copies_act_as_one,
        "wait-notice-says-why": r.wait_notice_says_why,
        "cdi-mounts-are-scheduled": r.cdi_mounts_are_scheduled,
        "train-baseline": r.train_baseline,
        "train-on": lambda: r.train_pair("train-on", ["--anti-thrashing", "on",
                                                      "--time-quantum", "500ms"]),
    }
    for name, fn in scenarios.items():
        if a.only and a.only not in name:
            continue
        try:
            fn()
        except Exception as e:  # a scenario's crash is its failure, not the suite's
            where = traceback.extract_tb(e.__traceback__)[-1]
            r.record(name, False, f"exception: {e!r} at line {where.lineno}")
    passed = sum(1 for _, ok, _ in r.results if ok)
    print(f"{passed} passed, {len(r.results) - passed} failed")
    return 0 if passed == len(r.results) else 1


if __name__ == "__main__":
    sys.exit(main())
