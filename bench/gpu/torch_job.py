#!/usr/bin/env python3
"""A PyTorch job for the oversubscription benchmark (oversub_bench.py).

  torch_job.py --ws-mib N --passes P --steps S --cpu-s C   one job
  torch_job.py --info [--calib-mib 2048] [--rates-mib 4096] the card, the
                                                           cost of one pass
                                                           and the bus

The job allocates its working set as tensors of 1 GiB (float32; the last one
holds the remainder) with torch.empty and fills each on the GPU with a
pattern: element j of tensor t holds (j mod 1024) + (t mod 97). Each step
runs P passes of x.mul_(-1).add_(b) over every tensor (b an integer in
-6..6 that changes with every pass and step), waits for the GPU
(torch.cuda.synchronize) and then spins the CPU for C seconds (busy, no
sleep; none after the last step). Every value stays a small integer, exactly
representable in float32, so the result has a closed form: after m passes
x = (-1)^m x0 + K with K = sum over passes i of (-1)^(m-1-i) b_i (m and K
kept per tensor). At the end each tensor is checked on the GPU against it,
element by element (in slices of 64 MiB) and by its float64 sum.

For the sweep bench (sweep_bench.py), how the memory is allocated and how
much of it a step touches:
  --alloc-style caching    the tensors as above, through PyTorch's caching
                           allocator (the default)
  --alloc-style one-block  one torch.empty of the whole working set (one
                           cudaMalloc, as JAX's preallocation makes with
                           XLA_PYTHON_CLIENT_PREALLOCATE; JAX itself takes
                           75% of the card whatever it needs), the tensors
                           views of it
  --alloc-style small      PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every
                           torch.empty its own cudaMalloc) and the working
                           set led by --small-count (2048) tensors of 1 MiB,
                           under the 2 MiB VMM granularity; a pass over many
                           tensors uses torch._foreach_mul_/_foreach_add_
  --alloc-style growing    the tensors allocated and filled a share a step
                           (ceil(T * (s + 1) / S) of the T tensors exist from
                           step s on; the growth counts into the step's GPU
                           part)
  --touch-mib M            each step's passes cover only the next tensors in
                           turn, M MiB of them (at least one tensor), for
                           bursts shorter than a pass over the working set

Prints one JSON line: {"total_s", "startup_s", "fill_s", "steps" (per-step
seconds, GPU + CPU), "gpu_s" (per-step GPU part: submission to completion,
lock waits included), "verify_s", "verified", "ws_gib", "alloc_style",
"touch_mib", "tensors", "error"}. With
TORCH_JOB_SLOW_MS=N in the environment it also has "slow_calls": the calls
of the steps and the check that kept the CPU N ms or longer, each as [what,
CLOCK_MONOTONIC start in s, ms] (the first 200), to lay beside
libnvshare.so's debug log.
Exit status: 0; 2 on CUDA out of memory; 3 when verification fails; 1 on
another error (the JSON line says which, whenever it can be printed).

--info prints {"total_bytes", "free_bytes", "name", "ms_per_gib_pass",
"bus"} (torch.cuda.mem_get_info() in a process that has made its context
and nothing else, the time of one pass over 1 GiB, from a timing over
--calib-mib MiB, and pinned copies of --rates-mib MiB: "out_s" device to
host alone, "in_s" host to device alone, "both_s" both at once on two
streams, medians of 3; "bus" is null with --rates-mib 0). Also:
--ready-file PATH (created once the working set is allocated and filled,
before the first step),
--die-with-parent (SIGKILL when the process that started it ends).
PYTORCH_CUDA_ALLOC_CONF is left as the environment has it; the benchmark
runs the job with it unset (the default caching allocator, which reaches
the driver through cuMemAlloc_v2).
"""
import argparse
import ctypes
import json
import os
import sys
import time

T0 = time.monotonic()
GIB = 1 << 30
MIB = 1 << 20
ROW = 1024                # the fill pattern's period (elements)
SLICE_ROWS = 16384        # 64 MiB of float32 per verification slice
SMALL_MIB = 1             # --alloc-style small: under the VMM granularity (2 MiB)
STYLES = ("caching", "one-block", "small", "growing")


class SlowCalls:
    """Times calls into torch; keeps those that took `ms` or longer."""

    def __init__(self, ms):
        self.ms, self.seen = ms, []

    def __call__(self, what, fn):
        if self.ms <= 0:
            return fn()
        t0 = time.monotonic()
        r = fn()
        ms = (time.monotonic() - t0) * 1000
        if ms >= self.ms and len(self.seen) < 200:
            self.seen.append([what, round(t0, 4), round(ms, 1)])
        return r


def die_with_parent():
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it ended before the call above
        sys.exit(1)


def spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for i in range(1000):
            x += i
    return x


def b_of(i):
    """The constant added by pass i (over the whole job)."""
    return float((i * 7) % 13 - 6)


def is_oom(e):
    return "out of memory" in str(e).lower()


def emit(doc, code):
    print(json.dumps(doc), flush=True)
    sys.exit(code)


def bus_rates(torch, mib, rounds=3):
    """Pinned copies of `mib` MiB: device to host alone, host to device
    alone, and both at once on two streams (what a switch does: the
    releaser's copies out beside the next holder's copies in). Medians of
    `rounds`, in seconds."""
    n = mib * MIB
    dev_out = torch.ones(n, dtype=torch.uint8, device="cuda")
    dev_in = torch.empty(n, dtype=torch.uint8, device="cuda")
    host_out = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    host_in = torch.ones(n, dtype=torch.uint8, pin_memory=True)
    s_out, s_in = torch.cuda.Stream(), torch.cuda.Stream()

    def timed(out, into):
        torch.cuda.synchronize()
        t0 = time.monotonic()
        if out:
            with torch.cuda.stream(s_out):
                host_out.copy_(dev_out, non_blocking=True)
        if into:
            with torch.cuda.stream(s_in):
                dev_in.copy_(host_in, non_blocking=True)
        torch.cuda.synchronize()
        return time.monotonic() - t0

    def median_of(out, into):
        return sorted(timed(out, into) for _ in range(rounds))[rounds // 2]

    timed(True, True)  # warm-up
    out_s, in_s, both_s = median_of(True, False), median_of(False, True), median_of(True, True)
    del dev_out, dev_in, host_out, host_in
    torch.cuda.empty_cache()
    return {"bytes": n, "out_s": out_s, "in_s": in_s, "both_s": both_s}


def info(torch, calib_mib, rates_mib):
    free, total = torch.cuda.mem_get_info()
    n = calib_mib * MIB // 4
    x = torch.zeros(n, dtype=torch.float32, device="cuda")
    for _ in range(2):  # warm-up
        x.mul_(-1.0).add_(1.0)
    torch.cuda.synchronize()
    reps = 10
    t0 = time.monotonic()
    for _ in range(reps):
        x.mul_(-1.0).add_(1.0)
    torch.cuda.synchronize()
    ms = (time.monotonic() - t0) * 1000 / reps / (calib_mib / 1024)
    del x
    return {"total_bytes": total, "free_bytes": free,
            "name": torch.cuda.get_device_name(0), "ms_per_gib_pass": ms,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "bus": bus_rates(torch, rates_mib) if rates_mib > 0 else None}


def layout(a):
    """MiB of each tensor, in order: 1 GiB ones (the last holds the
    remainder), led with --alloc-style small by --small-count tensors of
    SMALL_MIB."""
    small = min(a.small_count, a.ws_mib // SMALL_MIB) if a.alloc_style == "small" else 0
    sizes, left = [SMALL_MIB] * small, a.ws_mib - small * SMALL_MIB
    while left > 0:
        sizes.append(min(1024, left))
        left -= sizes[-1]
    return sizes


def touch(torch, group, b):
    """One pass over the tensors of group: x = -x + b."""
    if len(group) > 8:  # many small tensors: a few launches, not two each
        torch._foreach_mul_(group, -1.0)
        torch._foreach_add_(group, b)
        return
    for x in group:
        x.mul_(-1.0).add_(b)


def run(torch, a, doc):
    dev = torch.device("cuda")
    sizes = layout(a)
    base = torch.arange(ROW, dtype=torch.float32)  # CPU, exact small integers
    block = None
    if a.alloc_style == "one-block":  # one allocation, the tensors views of it
        block = torch.empty(a.ws_mib * MIB, dtype=torch.uint8, device=dev)
    offs = [0]
    for mib in sizes:
        offs.append(offs[-1] + mib * MIB)
    tensors = []

    def grow(upto):
        while len(tensors) < upto:
            t = len(tensors)
            n = sizes[t] * MIB // 4
            if block is None:
                x = torch.empty(n, dtype=torch.float32, device=dev)
            else:
                x = block[offs[t]:offs[t + 1]].view(torch.float32)
            x.view(-1, ROW).copy_((base + (t % 97)).to(dev).expand(n // ROW, ROW))
            tensors.append(x)

    def due(s):  # tensors that exist from step s on (growing: a share a step)
        if a.alloc_style != "growing":
            return len(sizes)
        return -(-len(sizes) * (s + 1) // max(1, a.steps))

    t_fill = time.monotonic()
    doc["startup_s"] = t_fill - T0
    grow(due(0))
    torch.cuda.synchronize()
    doc["fill_s"] = time.monotonic() - t_fill
    if a.ready_file:
        open(a.ready_file, "w").close()
    slow = SlowCalls(float(os.environ.get("TORCH_JOB_SLOW_MS", "0")))
    m = 0  # passes done
    mt, kt = [0] * len(sizes), [0.0] * len(sizes)  # per tensor: passes and K
    nxt = 0  # the tensor the next step's window starts at
    steps, gpu = [], []
    for s in range(a.steps):
        t0 = time.monotonic()
        grow(due(s))
        sel = list(range(len(tensors)))
        if a.touch_mib > 0:  # the next tensors in turn, --touch-mib MiB of them
            sel, mib = [], 0
            while mib < a.touch_mib and len(sel) < len(tensors):
                sel.append((nxt + len(sel)) % len(tensors))
                mib += sizes[sel[-1]]
            nxt = (nxt + len(sel)) % len(tensors)
        group = [tensors[i] for i in sel]
        for _ in range(a.passes):
            b = b_of(m)
            touch(torch, group, b)
            for i in sel:
                kt[i] = -kt[i] + b
                mt[i] += 1
            m += 1
        slow("sync", torch.cuda.synchronize)
        t1 = time.monotonic()
        gpu.append(t1 - t0)
        if s + 1 < a.steps:
            spin(a.cpu_s)
        steps.append(time.monotonic() - t0)
    grow(len(sizes))  # a growing job of no steps
    doc["steps"], doc["gpu_s"] = steps, gpu
    t_ver = time.monotonic()
    bad = []
    for t, x in enumerate(tensors):
        off = t % 97
        sign, k_sum = (-1.0 if mt[t] % 2 else 1.0), kt[t]
        row = slow("row", lambda: (sign * (base + off) + k_sum).to(dev))
        rows = x.numel() // ROW
        mismatch = 0
        for sl in x.view(rows, ROW).split(SLICE_ROWS):
            ne = slow("ne", lambda: sl != row)
            count = slow("count", ne.sum)
            mismatch += int(slow("read", count.item))
        total = slow("sum64", lambda: x.sum(dtype=torch.float64))
        total = slow("read64", total.item)
        # sum of (j mod 1024) over whole rows, plus the offset, exactly
        expect = sign * (rows * (ROW * (ROW - 1) // 2) + off * x.numel()) + k_sum * x.numel()
        if mismatch or total != expect:
            bad.append({"tensor": t, "mismatched": mismatch, "sum": total, "expected": expect})
    doc["verify_s"] = time.monotonic() - t_ver
    if slow.ms > 0:
        doc["slow_calls"] = slow.seen
    doc["passes_done"] = m
    doc["tensors"] = len(tensors)
    doc["verified"] = not bad
    if bad:
        doc["error"] = f"verification failed in {len(bad)} of {len(tensors)} tensors"
        doc["bad"] = bad[:8]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--ws-mib", type=int, default=1024)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--cpu-s", type=float, default=1.0)
    ap.add_argument("--alloc-style", choices=STYLES, default="caching")
    ap.add_argument("--small-count", type=int, default=2048)
    ap.add_argument("--touch-mib", type=int, default=0)
    ap.add_argument("--info", action="store_true")
    ap.add_argument("--calib-mib", type=int, default=2048)
    ap.add_argument("--rates-mib", type=int, default=4096)
    ap.add_argument("--ready-file")
    ap.add_argument("--die-with-parent", action="store_true")
    a = ap.parse_args()
    if a.die_with_parent:
        die_with_parent()
    if a.alloc_style == "small":  # every torch.empty its own cudaMalloc
        os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    doc = {"pid": os.getpid(), "ws_gib": a.ws_mib / 1024, "passes": a.passes,
           "steps_asked": a.steps, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
           "alloc_style": a.alloc_style, "touch_mib": a.touch_mib,
           "verified": False, "error": None}
    try:
        import torch
        if a.info:
            print(json.dumps(info(torch, a.calib_mib, a.rates_mib)), flush=True)
            return 0
        run(torch, a, doc)
    except Exception as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
        doc["error"] = f"{type(e).__name__}: {e}"[:2000]
        doc["total_s"] = time.monotonic() - T0
        emit(doc, 2 if is_oom(e) else 1)
    doc["total_s"] = time.monotonic() - T0
    emit(doc, 0 if doc["verified"] else 3)


if __name__ == "__main__":
    sys.exit(main())
