#!/usr/bin/env python3
"""Side-by-side launch/copy submission cost: plain CUDA vs under libnvshare.so
holding the lock (nvshared in `on` mode, a single client, so the process holds
the lock throughout and the gate's fast path is what is measured).

Usage: run_launch_bench.py --nvshared BIN --lib LIB --bench BIN [--rounds N]
The two variants are interleaved round by round; medians and ratios printed.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def run(cmd, env):  # -> (ns per launch, ns per async copy)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=True)
    f = out.stdout.split()
    return float(f[1]), float(f[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvshared", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    wd = tempfile.mkdtemp()
    sock = os.path.join(wd, "s.sock")
    d = subprocess.Popen([a.nvshared, "--socket", sock, "--anti-thrashing", "on"],
                         stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    plain_env = dict(os.environ)
    lib_env = dict(os.environ, LD_PRELOAD=a.lib, NVSHARE_SOCKET=sock)
    # plain-managed: no nvshare, but the copies go to managed memory like
    # nvshare's rewritten cudaMalloc: the driver's cost of managed memory,
    # apart from what the library adds.
    # The *-2M variants copy into a 2 MiB cudaMalloc, which nvshare keeps as
    # device memory (smaller ones are managed memory).
    big = ["20000", "15", "device", str(2 << 20)]
    # The *-1M variants: a 1 MiB cudaMalloc, below the swap granularity.
    mid = ["20000", "15", "device", str(1 << 20)]
    res = {"plain": [], "plain-managed": [], "nvshare": [], "plain-1M": [], "nvshare-1M": [],
           "plain-2M": [], "nvshare-2M": []}
    for _ in range(a.rounds):
        res["plain"].append(run([a.bench], plain_env))
        res["plain-managed"].append(run([a.bench, "20000", "15", "managed"], plain_env))
        res["nvshare"].append(run([a.bench], lib_env))
        res["plain-1M"].append(run([a.bench] + mid, plain_env))
        res["nvshare-1M"].append(run([a.bench] + mid, lib_env))
        res["plain-2M"].append(run([a.bench] + big, plain_env))
        res["nvshare-2M"].append(run([a.bench] + big, lib_env))
    d.terminate()
    d.wait()
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
           for k, v in res.items()}
    print(f"{'variant':10} {'ns/launch':>10} {'ns/async copy':>14}")
    for k, (l, c) in med.items():
        print(f"{k:14} {l:10.1f} {c:14.1f}")
    for base in ("plain", "plain-managed"):
        print(f"ratio nvshare/{base}: launch {med['nvshare'][0] / med[base][0]:.3f}, "
              f"async copy {med['nvshare'][1] / med[base][1]:.3f}")
    print(f"ratio nvshare-1M/plain-1M: launch {med['nvshare-1M'][0] / med['plain-1M'][0]:.3f}, "
          f"async copy {med['nvshare-1M'][1] / med['plain-1M'][1]:.3f}")
    print(f"ratio nvshare-2M/plain-2M: launch {med['nvshare-2M'][0] / med['plain-2M'][0]:.3f}, "
          f"async copy {med['nvshare-2M'][1] / med['plain-2M'][1]:.3f}")
    print(f"({a.rounds} interleaved rounds)")


if __name__ == "__main__":
    main()
