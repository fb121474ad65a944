#!/usr/bin/env python3
"""Framework paths under libnvshare.so (issue 7, first probe): each case runs
in its own process, without and with the library, and must give the same
answer both ways. One line per case: PASS/FAIL, and the first error line.

Usage: frameworks.py --nvshared BIN --lib LIB [--only NAME]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

CASES = {
    "torch-default": ("", """
import torch
torch.manual_seed(0)
x = torch.randn(2048, 2048, device='cuda'); print(float((x @ x).sum()))
"""),
    "torch-expandable-segments": ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", """
import torch
torch.manual_seed(0)
x = torch.randn(2048, 2048, device='cuda'); print(float((x @ x).sum()))
"""),
    "torch-cudaMallocAsync": ("PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync", """
import torch
torch.manual_seed(0)
x = torch.randn(2048, 2048, device='cuda'); print(float((x @ x).sum()))
"""),
    "torch-cuda-graph": ("", """
import torch
torch.manual_seed(0)
x = torch.randn(1024, 1024, device='cuda'); y = torch.empty_like(x)
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y.copy_(x @ x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y.copy_(x @ x)
for _ in range(3): g.replay()
torch.cuda.synchronize(); print(float(y.sum()))
"""),
    "torch-compile": ("", """
import torch
torch.manual_seed(0)
f = torch.compile(lambda a: torch.relu(a) * 2 + 1)
x = torch.randn(4096, device='cuda'); print(float(f(x).sum()))
"""),
    "torch-multiprocessing": ("", """
import torch, torch.multiprocessing as mp
def child(q):
    t = q.get(); print(float(t.sum()))
if __name__ == '__main__':
    mp.set_start_method('spawn')
    q = mp.Queue(); p = mp.Process(target=child, args=(q,)); p.start()
    t = torch.arange(1000., device='cuda'); q.put(t); p.join(); print(p.exitcode)
"""),
    "triton": ("", """
import torch, triton, triton.language as tl
@triton.jit
def add(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B); m = i < n
    tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
x = torch.arange(10000., device='cuda'); o = torch.empty_like(x)
add[(10,)](x, x, o, 10000, B=1024); print(float(o.sum()))
"""),
    "cupy-pool": ("", """
import cupy as cp
a = cp.arange(1000000, dtype=cp.float64); print(float((a * 2).sum()))
"""),
    "jax-prealloc": ("XLA_PYTHON_CLIENT_MEM_FRACTION=0.1", """
import jax.numpy as jnp
x = jnp.arange(1000000.0); print(float((x * 2).sum()))
"""),
    "jax-no-prealloc": ("XLA_PYTHON_CLIENT_PREALLOCATE=false", """
import jax.numpy as jnp
x = jnp.arange(1000000.0); print(float((x * 2).sum()))
"""),
    "nccl-allreduce": ("MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 NCCL_NVLS_ENABLE=0", """
import torch, torch.distributed as dist
dist.init_process_group('nccl', rank=0, world_size=1)
t = torch.ones(1 << 20, device='cuda'); dist.all_reduce(t); torch.cuda.synchronize()
print(float(t.sum())); dist.destroy_process_group()
"""),
}


def run(code, env, timeout=240):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        p = subprocess.run([sys.executable, f.name], env=env, capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout.strip(), p.stderr.strip()
    except subprocess.TimeoutExpired:
        return -1, "", "timed out"
    finally:
        os.unlink(f.name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvshared", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    sock = os.path.join(tempfile.mkdtemp(), "s.sock")
    d = subprocess.Popen([a.nvshared, "--socket", sock, "--no-bus", "--anti-thrashing", "on"],
                         stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    failed = 0
    for name, (extra, code) in CASES.items():
        if a.only and a.only not in name:
            continue
        env = dict(os.environ)
        for kv in extra.split():
            k, v = kv.split("=", 1)
            env[k] = v
        ref = run(code, env)
        got = run(code, dict(env, LD_PRELOAD=a.lib, NVSHARE_SOCKET=sock))
        ok = ref[0] == 0 and got[0] == 0 and ref[1] == got[1]
        failed += not ok
        why = "" if ok else f" | without: rc {ref[0]} {ref[1][-80:]!r} | with: rc {got[0]} " \
                            f"{got[1][-80:]!r} {got[2].splitlines()[-1][-200:] if got[2] else ''}"
        print(f"{'PASS' if ok else 'FAIL'} {name}{why}", flush=True)
    d.terminate()
    d.wait()
    print(f"{len([n for n in CASES if not a.only or a.only in n]) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
