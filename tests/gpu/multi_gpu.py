#!/usr/bin/env python3
"""A process on two GPUs under libnvshare.so (issue 43, item 5), on two real GPUs.

Each case runs once without the library (the reference answer) and once
under nvshared with the library; both must print the same RESULT line and
exit 0. Work on GPU 1 reaches cudaMalloc memory of GPU 0 (swap-engine memory
under the library) through peer access:

  peer-kernel      a CuPy kernel on GPU 1 reads and writes GPU 0's array
                   after cudaDeviceEnablePeerAccess;
  copy-peer        torch copies between the GPUs both ways (peer copies);
  data-parallel    torch.nn.DataParallel over both GPUs trains a few steps;
  peer-after-swap  the peer kernel of peer-kernel, in rounds, while another
                   process on GPU 0 takes turns with it on a GPU that both do
                   not fit (--capacity), so that its GPU 0 memory is swapped
                   out and back in between rounds (its log must say so).

Usage: multi_gpu.py --nvshared BIN --lib LIB [--only NAME] [--out DIR]
One line per case: PASS/FAIL and why; exit status 0 if all passed, 77 if
the machine has fewer than two GPUs.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_suite import Daemon, finish  # noqa: E402

PEER_KERNEL = """
import cupy as cp, os, time
n = (int(os.environ.get('NVS_MIB', '256')) << 20) // 4
rounds = int(os.environ.get('NVS_ROUNDS', '1'))
with cp.cuda.Device(0):
    a = cp.arange(n, dtype=cp.float32)
    cp.cuda.Device(0).synchronize()
k = cp.RawKernel(r'''
extern "C" __global__ void twice(float* a, float* b, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x) {
        b[i] = 2.0f * a[i];
        a[i] += 1.0f;
    }
}''', 'twice')
sums = []
with cp.cuda.Device(1):
    cp.cuda.runtime.deviceEnablePeerAccess(0)
    b = cp.empty(n, dtype=cp.float32)
    for r in range(rounds):
        if r:
            time.sleep(float(os.environ.get('NVS_PAUSE_S', '0')))
        k((1024,), (256,), (a, b, cp.int64(n)))
        cp.cuda.Device(1).synchronize()
        sums.append(float(b[::4096].sum()))
with cp.cuda.Device(0):
    sums.append(float(a[::4096].sum()))
print('RESULT', ' '.join(f'{s:.1f}' for s in sums))
"""

COPY_PEER = """
import torch
torch.manual_seed(0)
x = torch.randn(64 << 20, device='cuda:0')
y = x.to('cuda:1') * 3
z = y.to('cuda:0') + x
torch.cuda.synchronize(0); torch.cuda.synchronize(1)
print('RESULT', f'{float(z.double().sum()):.3f}', f'{float(y.double().abs().sum()):.3f}')
"""

DATA_PARALLEL = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 1024)).cuda(0)
dp = torch.nn.DataParallel(model, device_ids=[0, 1])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(2048, 1024, device='cuda:0'); t = torch.randn(2048, 1024, device='cuda:0')
for step in range(50):
    loss = ((dp(x) - t) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print('RESULT', f'{loss.item():.5f}')
"""

# The other process of peer-after-swap: GPU 0 only, its own memory, work in
# rounds with pauses (so that the two take turns).
GPU0_WORK = """
import torch, time
x = torch.ones(int(6.5 * (1 << 30)) // 4, device='cuda:0')
for r in range(4):
    for _ in range(20):
        x.mul_(1.0)
    torch.cuda.synchronize()
    time.sleep(0.5)
print('RESULT', float(x[::1 << 20].sum()))
"""

CASES = {
    "peer-kernel": dict(code=PEER_KERNEL),
    "copy-peer": dict(code=COPY_PEER),
    "data-parallel": dict(code=DATA_PARALLEL),
    "peer-after-swap": dict(code=PEER_KERNEL, env={"NVS_MIB": "6656", "NVS_ROUNDS": "6",
                                                    "NVS_PAUSE_S": "0.7", "NVSHARE_DEBUG": "1"},
                            other=GPU0_WORK, daemon=["--capacity", "10G"]),
}


def start(code, env, out_dir, name):
    path = os.path.join(out_dir, f"{name}.py")
    with open(path, "w") as f:
        f.write(code)
    return subprocess.Popen([sys.executable, path], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def result_line(out):
    lines = [l for l in out.splitlines() if l.startswith("RESULT")]
    return lines[-1] if lines else None


def run_case(a, name, spec):
    d_out = os.path.join(a.out, name)
    os.makedirs(d_out, exist_ok=True)
    env = dict(os.environ, **spec.get("env", {}))
    env.pop("LD_PRELOAD", None)
    ((rc, ref),) = finish([start(spec["code"], env, d_out, "reference")], 300)
    open(os.path.join(d_out, "reference.out"), "w").write(ref)
    if rc != 0 or result_line(ref) is None:
        return False, f"the reference run failed ({rc}): {ref.strip()[-300:]}"
    d = Daemon(a.nvshared, d_out, ["--anti-thrashing", "auto"] + spec.get("daemon", []))
    try:
        lib_env = dict(env, LD_PRELOAD=a.lib, NVSHARE_SOCKET=d.sock)
        procs = [start(spec["code"], lib_env, d_out, "under-nvshare")]
        if "other" in spec:
            time.sleep(3)  # the first holds GPU 0 and has run a round
            other_env = dict(os.environ, LD_PRELOAD=a.lib, NVSHARE_SOCKET=d.sock)
            procs.append(start(spec["other"], other_env, d_out, "other"))
        outs = finish(procs, 300)
    finally:
        d.stop()
    for i, (code, out) in enumerate(outs):
        open(os.path.join(d_out, f"run{i}.out"), "w").write(out)
    code, out = outs[0]
    if code != 0 or result_line(out) != result_line(ref):
        return False, (f"under nvshare: exit {code}, {result_line(out)!r} where the reference "
                       f"says {result_line(ref)!r}: {out.strip()[-400:]}")
    if "other" in spec:
        if outs[1][0] != 0:
            return False, f"the other process failed: {outs[1][1].strip()[-300:]}"
        if "swapped out" not in out or "swapped in" not in out:
            return False, "its GPU 0 memory was never swapped out and back in"
        return True, (f"{result_line(out)}; swapped out {out.count('swapped out')}x, "
                      f"in {out.count('swapped in')}x")
    return True, result_line(out)


def gpu_count():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for l in r.stdout.splitlines() if l.startswith("GPU "))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvshared", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--only")
    ap.add_argument("--out", default=tempfile.gettempdir())
    a = ap.parse_args()
    if gpu_count() < 2:
        print("SKIP: fewer than two GPUs")
        return 77
    os.makedirs(a.out, exist_ok=True)
    failed = total = 0
    for name, spec in CASES.items():
        if a.only and a.only not in name:
            continue
        total += 1
        t0 = time.time()
        try:
            ok, detail = run_case(a, name, spec)
        except Exception as e:  # a case's crash is its failure, not the suite's
            ok, detail = False, f"exception: {e!r}"
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} ({time.time() - t0:.0f}s): {detail}",
              flush=True)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
