#!/usr/bin/env python3
"""Sharing benchmark (issue 6): two jobs that alternate GPU bursts over a
working set with CPU phases, and an interactive job next to a busy batch job,
each run under every configuration side by side in one session:

  sequential   the two jobs one after the other, no nvshare
  plain        both at once, plain CUDA, no nvshare
  demand       nvshare with demand paging only, as upstream nvshare works:
               no bulk prefetch, early release after 5 s idle, quantum 30 s
               (on an emulated oversubscribed GPU the outgoing holder's data
               is evicted, as memory pressure would do, and comes back by
               page faults)
  nvshare      nvshare as shipped (auto mode, bulk prefetch/evict, 100 ms
               early release)
  nvshare-on   the same in `on` mode (bursts always take turns)
  nvshare-on-evict-all   oversubscribed only: `on` mode evicting everything
               on every switch, whose swap-ins measure the bulk transfer rate

Oversubscription is emulated: nvshared's --capacity is set below the pair's
total while the card itself has room for both (safety rule: the managed
total stays far under the card's free memory).

Usage: share_bench.py --nvshared BIN --nvsharectl BIN --lib LIB --job BIN
                      [--ws-mib 8192] [--gpu-s 1.0] [--bursts 4] [--out FILE]
Prints a table; writes every figure as JSON to --out.
"""
import argparse
import json
import os
import subprocess
import tempfile
import threading
import time


def simulate_ideal(bursts, gpu_s, cpu_s, switch_s=0.0):
    """Two identical jobs, one GPU taken in turns; each change of the job on
    the GPU costs switch_s. The better of greedy interleaving and running one
    job's bursts after the other's (which pays one switch)."""
    gpu_free, t, last = 0.0, [0.0, 0.0], None
    left = [bursts, bursts]
    while any(left):
        j = 0 if (left[0] and (not left[1] or t[0] <= t[1])) else 1
        start = max(t[j], gpu_free) + (switch_s if last not in (None, j) else 0.0)
        gpu_free = start + gpu_s
        left[j] -= 1
        last = j
        t[j] = gpu_free + (cpu_s if left[j] else 0.0)
    one_after_other = 2 * bursts * gpu_s + (bursts - 1) * cpu_s + switch_s
    return min(max(t), one_after_other)


class Bench:
    def __init__(self, a):
        self.a = a
        self.wd = tempfile.mkdtemp()
        self.results = {}

    def run_jobs(self, jobs, env=None, concurrent=True, status_sock=None):
        """jobs: list of argument lists. Returns (wall seconds, parsed outputs, peak swap stats)."""
        e = dict(os.environ, **(env or {}))
        peak = {}
        history = {}  # pid -> the status of that client each time its counts grew
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                try:
                    out = subprocess.run([self.a.nvsharectl, "-s", status_sock, "socket-status"],
                                         capture_output=True, text=True, timeout=5).stdout
                    for c in json.loads(out)["clients"]:
                        seen = peak.get(c["pid"], {})
                        if (c["swap_ins"], c["swap_outs"]) > (seen.get("swap_ins", -1),
                                                              seen.get("swap_outs", -1)):
                            peak[c["pid"]] = c
                            history.setdefault(c["pid"], []).append(c)
                except Exception:
                    pass
                time.sleep(0.05)

        w = threading.Thread(target=watch) if status_sock else None
        if w:
            w.start()
        t0 = time.time()
        outs = []
        if concurrent:
            procs = [subprocess.Popen([self.a.job] + j, env=e, stdout=subprocess.PIPE, text=True)
                     for j in jobs]
            outs = [p.communicate(timeout=900)[0] for p in procs]
        else:
            for j in jobs:
                outs.append(subprocess.run([self.a.job] + j, env=e, capture_output=True,
                                           text=True, timeout=900, check=True).stdout)
        wall = time.time() - t0
        stop.set()
        if w:
            w.join()
        self.last_history = history
        return wall, [json.loads(o.strip().splitlines()[-1]) for o in outs], peak

    def with_daemon(self, args, fn):
        sock = os.path.join(self.wd, f"s{time.time_ns()}.sock")
        log = open(os.path.join(self.wd, "nvshared.log"), "a")
        d = subprocess.Popen([self.a.nvshared, "--socket", sock, "--no-bus"] + args,
                             stdout=log, stderr=log)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        try:
            return fn(sock)
        finally:
            d.terminate()
            d.wait()
            log.close()

    def configs(self, capacity_mib):
        cap = ["--capacity", f"{capacity_mib}M"] if capacity_mib else []
        demand_env = {"NVSHARE_PREFETCH": "0", "NVSHARE_IDLE_RELEASE_MS": "5000",
                      "NVSHARE_EVICT": "auto"}
        configs = {
            "demand": (["--anti-thrashing", "on", "--time-quantum", "30s"] + cap, demand_env),
            "nvshare": (["--anti-thrashing", "auto"] + cap, {}),
            "nvshare-on": (["--anti-thrashing", "on"] + cap, {}),
        }
        if capacity_mib:
            # Evicting everything on every switch: slower, but every swap-in
            # then moves the whole working set, so its rate is the bulk
            # transfer rate (with partial eviction, part of what is
            # prefetched is already there and the rate would be inflated).
            configs["nvshare-on-evict-all"] = (["--anti-thrashing", "on"] + cap,
                                               {"NVSHARE_EVICT": "1"})
        return configs

    def pair(self, name, job, ideal, ideal_oversubscribed=None):
        row = {"ideal_s": ideal}
        if ideal_oversubscribed:
            row["ideal_oversubscribed_s"] = ideal_oversubscribed
        row["sequential_s"], _, _ = self.run_jobs([job, job], concurrent=False)
        row["plain_s"], _, _ = self.run_jobs([job, job])
        for mem, cap in (("fits", 0), ("oversubscribed", int(self.a.ws_mib * 1.5))):
            for cfg, (dargs, env) in self.configs(cap).items():
                def go(sock, env=env):
                    return self.run_jobs([job, job], dict(env, NVSHARE_SOCKET=sock,
                                                          LD_PRELOAD=self.a.lib), True, sock)
                wall, _, peak = self.with_daemon(dargs, go)
                row[f"{cfg}/{mem}_s"] = wall
                # Each swap-in on its own (between two readings that differ
                # by one swap-in), the first one left out: it populates new
                # memory that is mostly on the GPU already.
                rates = []
                for snaps in self.last_history.values():
                    for a, b in zip(snaps, snaps[1:]):
                        if b["swap_ins"] - a["swap_ins"] == 1 and a["swap_ins"] >= 1:
                            us = b["swap_in_us"] - a["swap_in_us"]
                            if us > 0:
                                rates.append((b["bytes_prefetched"] - a["bytes_prefetched"]) / us / 1e3)
                if rates:
                    rates.sort()
                    row[f"{cfg}/{mem}_swap_in_gbs"] = rates[len(rates) // 2]
                    row[f"{cfg}/{mem}_swap_in_n"] = len(rates)
                outs = [c for c in peak.values() if c["swap_outs"] > 0 and c["swap_out_us"] > 0]
                if outs:
                    row[f"{cfg}/{mem}_swap_out_gbs"] = max(
                        c["bytes_evicted"] / c["swap_out_us"] / 1e3 for c in outs)
                print(f"  {name} {cfg}/{mem}: {wall:.2f} s", flush=True)
        self.results[name] = row

    def interactive(self, batch, inter):
        row = {}

        def lat(outs):
            b = sorted(outs[1]["bursts_s"])
            return {"median_s": b[len(b) // 2], "worst_s": b[-1]}

        _, outs, _ = self.run_jobs([batch, inter])
        row["plain"] = lat(outs)
        cap = int(self.a.ws_mib * 1.1)
        for cfg, dargs, env in (
                ("demand/fits", ["--anti-thrashing", "on", "--time-quantum", "30s"],
                 {"NVSHARE_PREFETCH": "0", "NVSHARE_IDLE_RELEASE_MS": "5000"}),
                ("nvshare/fits", ["--anti-thrashing", "auto"], {}),
                ("nvshare/oversubscribed",
                 ["--anti-thrashing", "auto", "--capacity", f"{cap}M", "--time-quantum", "2s"], {})):
            def go(sock, env=env):
                return self.run_jobs([batch, inter], dict(env, NVSHARE_SOCKET=sock,
                                                          LD_PRELOAD=self.a.lib))
            _, outs, _ = self.with_daemon(dargs, go)
            row[cfg] = lat(outs)
            print(f"  interactive {cfg}: {row[cfg]}", flush=True)
        self.results["interactive"] = row


def main():
    ap = argparse.ArgumentParser()
    for k in ("nvshared", "nvsharectl", "lib", "job"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--evict-rate", help="bench/gpu/evict_rate: measures the transfer rates "
                    "behind the oversubscribed pair's ideal (whose switches must move data)")
    ap.add_argument("--ws-mib", type=int, default=8192)
    ap.add_argument("--gpu-s", type=float, default=1.0)
    ap.add_argument("--bursts", type=int, default=4)
    ap.add_argument("--out", default="share_bench.json")
    a = ap.parse_args()
    b = Bench(a)
    ms = json.loads(subprocess.run([a.job, "--calibrate", "--ws-mib", str(a.ws_mib)],
                                   capture_output=True, text=True, check=True).stdout)["ms_per_pass"]
    h2d = json.loads(subprocess.run([a.job, "--h2d-mib", "4096"], capture_output=True, text=True,
                                    check=True).stdout)["h2d_gbs"]
    passes = max(1, round(a.gpu_s * 1000 / ms))
    g = passes * ms / 1000
    b.results["setup"] = {"ws_mib": a.ws_mib, "ms_per_pass": ms, "passes": passes,
                          "gpu_burst_s": g, "bursts": a.bursts, "pinned_h2d_gbs": h2d}
    print(f"working set {a.ws_mib} MiB, {ms:.2f} ms/pass, burst {g:.2f} s, pinned H2D {h2d} GB/s",
          flush=True)
    switch_s = None
    if a.evict_rate:
        # Oversubscribed at 1.5 x the working set, a switch must move
        # 2 ws - capacity = ws / 2 out and the same back in, at best.
        moved_mib = a.ws_mib // 2
        rates = [json.loads(l) for l in subprocess.run(
            [a.evict_rate, "--mib", str(moved_mib), "--rounds", "3"], capture_output=True,
            text=True, check=True).stdout.splitlines()]
        r = rates[0]  # one stream, as the library moves data
        switch_s = moved_mib / 1024 * 1.073741824 * (1 / r["evict_gbs"] + 1 / r["swap_in_gbs"])
        b.results["setup"].update(evict_gbs=r["evict_gbs"], swap_in_gbs=r["swap_in_gbs"],
                                  min_switch_s=switch_s)
        print(f"bulk eviction {r['evict_gbs']} GB/s, swap-in {r['swap_in_gbs']} GB/s: "
              f"a switch moving {moved_mib} MiB each way takes {switch_s:.3f} s", flush=True)
    for name, cpu in (("50/50", g), ("90/10", g / 9)):
        job = ["--ws-mib", str(a.ws_mib), "--passes", str(passes), "--bursts", str(a.bursts),
               "--cpu-ms", str(int(cpu * 1000))]
        b.pair(name, job, simulate_ideal(a.bursts, g, cpu),
               simulate_ideal(a.bursts, g, cpu, switch_s) if switch_s else None)
    inter_passes = max(1, round(50 / json.loads(subprocess.run(
        [a.job, "--calibrate", "--ws-mib", "1024"], capture_output=True, text=True,
        check=True).stdout)["ms_per_pass"]))
    batch = ["--ws-mib", str(a.ws_mib), "--passes", str(passes), "--bursts", "14", "--cpu-ms", "0"]
    inter = ["--ws-mib", "1024", "--passes", str(inter_passes), "--bursts", "8", "--cpu-ms", "1000"]
    b.interactive(batch, inter)
    with open(a.out, "w") as f:
        json.dump(b.results, f, indent=1)
    # The table.
    print("\ncompletion time of the pair (s); ratio to ideal interleaving in brackets")
    for name in ("50/50", "90/10"):
        r = b.results[name]
        ideal = r["ideal_s"]
        cells = [f"ideal {ideal:.1f}"]
        if "ideal_oversubscribed_s" in r:
            cells.append(f"ideal oversubscribed (measured switch) {r['ideal_oversubscribed_s']:.1f}")
        cells += [f"sequential {r['sequential_s']:.1f} "
                 f"[{r['sequential_s'] / ideal:.2f}]", f"plain {r['plain_s']:.1f} "
                 f"[{r['plain_s'] / ideal:.2f}]"]
        for k in sorted(k for k in r if k.endswith("_s") and "/" in k):
            cells.append(f"{k[:-2]} {r[k]:.1f} [{r[k] / ideal:.2f}]")
        print(f"{name}: " + "; ".join(cells))
        for k in sorted(k for k in r if k.endswith("_gbs")):
            print(f"  {k[:-4]}: {r[k]:.1f} GB/s = {r[k] / h2d:.0%} of pinned H2D {h2d} GB/s")
    print("interactive burst latency while a batch job runs (s):")
    for k, v in b.results["interactive"].items():
        print(f"  {k}: median {v['median_s']:.3f} worst {v['worst_s']:.3f}")


if __name__ == "__main__":
    main()
