#!/usr/bin/env python3
"""Real frameworks under libnvshare.so (issue 7), on a real GPU.

For each case: a run without the library gives the reference answer; a run
alone under nvshared measures the memory the library accounts for it; then
two instances at once under nvshared in auto mode, with a capacity that one
instance fits and two do not, must

  - both print the reference answer,
  - be serialized (nvshared reports the GPU serializing, and once one lock
    holder is left, never two again),
  - each be accounted the memory measured alone, of the expected kind
    (managed = pageable, pinned = resident: see libnvshare(8) FRAMEWORKS).

Instances wait at a barrier after their set-up, so their work overlaps in
time. Memory per instance is about 1-5 GiB: far below the card's.

Usage: frameworks.py --nvshared BIN --lib LIB [--only NAME] [--out DIR]
One line per case: PASS/FAIL and the figures; exit status 0 if all passed.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_suite import Daemon, finish, query_status  # noqa: E402

# Every case's program starts with this: set-up, then barrier(), then work.
PRELUDE = """
import os, time
def barrier():
    b = os.environ.get('NVS_BARRIER')
    if not b:
        return
    open(f'{b}.{os.getpid()}', 'w').close()
    while not os.path.exists(b):
        time.sleep(0.01)
"""

TORCH_TRAIN = """
import torch
torch.manual_seed(0)
ballast = torch.ones(256 << 20, device='cuda')  # 1 GiB of data the job keeps
model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 2048)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(1024, 2048, device='cuda'); y = torch.randn(1024, 2048, device='cuda')
torch.cuda.synchronize()
barrier()
for step in range(400):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print('RESULT', f'{loss.item():.6f}', float(ballast.sum()))
"""

CASES = {
    "torch-default": dict(code=TORCH_TRAIN, kind="managed"),
    "torch-expandable-segments": dict(
        env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, code=TORCH_TRAIN,
        kind="pinned"),
    "torch-cudaMallocAsync": dict(
        env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}, code=TORCH_TRAIN,
        kind="pinned"),
    "torch-compile": dict(kind="managed", code="""
import torch
torch.manual_seed(0)
ballast = torch.ones(256 << 20, device='cuda')
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                            torch.nn.Linear(1024, 1024)).cuda()
f = torch.compile(model)
x = torch.randn(4096, 1024, device='cuda')
with torch.no_grad():
    f(x); torch.cuda.synchronize()
    barrier()
    for _ in range(300):
        x = torch.tanh(f(x))
print('RESULT', f'{float(x.sum()):.4f}', float(ballast.sum()))
"""),
    "torch-cuda-graph": dict(kind="managed", code="""
import torch
torch.manual_seed(0)
ballast = torch.ones(256 << 20, device='cuda')
a = torch.randn(2048, 2048, device='cuda') / 64; x = torch.randn(2048, 2048, device='cuda')
b = torch.randn(2048, 2048, device='cuda')
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        x.copy_(torch.tanh(a @ x + b))
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    x.copy_(torch.tanh(a @ x + b))
torch.cuda.synchronize()
barrier()
for _ in range(1000):
    g.replay()
torch.cuda.synchronize()
print('RESULT', f'{float(x.sum()):.2f}', float(ballast.sum()))
"""),
    "torch-multiprocessing-plain": dict(
        env={"NVSHARE_MANAGED": "0"}, kind="pinned", code="""
import torch, torch.multiprocessing as mp
def child(q, r):
    t = q.get(timeout=60)
    r.put(float((t * 2).sum()))
    del t
if __name__ == '__main__':
    mp.set_start_method('spawn')
    ballast = torch.ones(256 << 20, device='cuda')
    t = torch.arange(1 << 20, dtype=torch.float32, device='cuda')
    torch.cuda.synchronize()
    barrier()
    q, r = mp.Queue(), mp.Queue()
    p = mp.Process(target=child, args=(q, r)); p.start()
    q.put(t)
    print('RESULT', r.get(timeout=120), float(ballast.sum()))
    p.join(60)
"""),
    "triton": dict(kind="managed", code="""
import torch, triton, triton.language as tl
@triton.jit
def axpy(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B); m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * 0.5 + tl.load(y + i, mask=m), mask=m)
n = 256 << 20
x = torch.ones(n, device='cuda'); y = torch.zeros(n, device='cuda')
axpy[(triton.cdiv(n, 1024),)](x, y, n, B=1024); torch.cuda.synchronize()
barrier()
for _ in range(200):
    axpy[(triton.cdiv(n, 1024),)](x, y, n, B=1024)
print('RESULT', float(y[:1000].sum()), float(y[-1000:].sum()))
"""),
    "cupy-pool": dict(kind="managed", code="""
import cupy as cp
ballast = cp.ones(256 << 20, dtype=cp.float32)
rs = cp.random.RandomState(0)
a = rs.standard_normal((2048, 2048), dtype=cp.float32) / 64
x = rs.standard_normal((2048, 2048), dtype=cp.float32)
b = rs.standard_normal((2048, 2048), dtype=cp.float32)
cp.cuda.Device().synchronize()
barrier()
for _ in range(500):
    x = cp.tanh(a @ x + b)
print('RESULT', f'{float(x.sum()):.2f}', float(ballast.sum()))
"""),
    # Preallocation takes a fraction of the capacity cuMemGetInfo reports:
    # 0.6 of 8 GiB per instance, so two do not fit 8 GiB.
    "jax-prealloc": dict(
        env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.6"}, capacity="8G", kind="pinned",
        ref_env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.05"}, code="""
import jax, jax.numpy as jnp
k = jax.random.PRNGKey(0)
a = jax.random.normal(k, (2048, 2048)) / 64; x = jax.random.normal(k, (2048, 2048))
b = jax.random.normal(jax.random.PRNGKey(1), (2048, 2048))
step = jax.jit(lambda a, x: jnp.tanh(a @ x + b))
step(a, x).block_until_ready()
barrier()
for _ in range(500):
    x = step(a, x)
print('RESULT', f'{float(x.sum()):.2f}')
"""),
    "jax-no-prealloc": dict(
        env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95"},
        kind=None, code="""
import jax, jax.numpy as jnp
k = jax.random.PRNGKey(0)
ballast = jnp.ones(256 << 20, dtype=jnp.float32)
a = jax.random.normal(k, (2048, 2048)) / 64; x = jax.random.normal(k, (2048, 2048))
b = jax.random.normal(jax.random.PRNGKey(1), (2048, 2048))
step = jax.jit(lambda a, x: jnp.tanh(a @ x + b))
step(a, x).block_until_ready()
barrier()
for _ in range(500):
    x = step(a, x)
print('RESULT', f'{float(x.sum()):.2f}', float(ballast.sum()))
"""),
    "nccl-allreduce": dict(kind=None, env={"NCCL_NVLS_ENABLE": "0"}, code="""
import torch, torch.distributed as dist
os.environ['MASTER_ADDR'] = '127.0.0.1'
os.environ['MASTER_PORT'] = str(29600 + int(os.environ.get('NVS_INSTANCE', '9')))
dist.init_process_group('nccl', rank=0, world_size=1)
ballast = torch.ones(256 << 20, device='cuda')
t = torch.ones(1 << 22, device='cuda'); torch.cuda.synchronize()
barrier()
for _ in range(200):
    dist.all_reduce(t); t /= 1.0001
torch.cuda.synchronize()
print('RESULT', f'{float(t.sum()):.2f}', float(ballast.sum()))
dist.destroy_process_group()
"""),
}

# Managed memory cannot be exported through CUDA IPC: without the opt-out,
# the sharing process must say why on stderr and nothing may hang.
MP_MANAGED = PRELUDE + """
import torch, torch.multiprocessing as mp
def child(q):
    try:
        q.get(timeout=20)
        print('child got it')
    except Exception as e:
        print('child: nothing came:', type(e).__name__)
if __name__ == '__main__':
    mp.set_start_method('spawn')
    t = torch.arange(1 << 20, dtype=torch.float32, device='cuda')
    q = mp.Queue(); p = mp.Process(target=child, args=(q,)); p.start()
    q.put(t); p.join(90); print('joined', p.exitcode)
"""


def result_of(out):
    lines = [l for l in out.splitlines() if l.startswith("RESULT")]
    return lines[-1] if lines else None


class Case:
    def __init__(self, args, name, spec):
        self.a, self.name, self.spec = args, name, spec
        self.path = os.path.join(args.out, f"case-{name}.py")
        with open(self.path, "w") as f:
            f.write(PRELUDE + spec["code"])

    def env(self, sock=None, extra=None, instance=0):
        e = dict(os.environ)
        e.update(self.spec.get("env", {}))
        e.update(extra or {})
        e["NVS_INSTANCE"] = str(instance)
        if sock:
            e["LD_PRELOAD"] = self.a.lib
            e["NVSHARE_SOCKET"] = sock
        return e

    def start(self, env):
        return subprocess.Popen([sys.executable, self.path], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)


class Watch:
    """Polls nvshared's status while programs run."""

    def __init__(self):
        self.memory, self.pinned = {}, {}
        self.serializing, self.max_holders = False, 0
        # A GPU that becomes serializing while two processes run on it asks
        # the later one to let go after draining its work; once one holder
        # is left, a second may never be granted.
        self.settled, self.violations = False, 0

    def poll(self, sock):
        try:
            st = query_status(sock)
        except OSError:
            return
        for c in st["clients"]:
            self.memory[c["pid"]] = max(self.memory.get(c["pid"], 0), c["memory"])
            self.pinned[c["pid"]] = max(self.pinned.get(c["pid"], 0), c["pinned_memory"])
        for g in st["gpus"]:
            holders = len(g["holders"])
            self.max_holders = max(self.max_holders, holders)
            if g["serializing"]:
                self.serializing = True
                if holders <= 1:
                    self.settled = True
                elif self.settled:
                    self.violations += 1

    def biggest(self):
        """(memory, pinned) of the client with the most memory."""
        if not self.memory:
            return 0, 0
        pid = max(self.memory, key=self.memory.get)
        return self.memory[pid], self.pinned[pid]


def run_case(a, name, spec):
    c = Case(a, name, spec)
    with tempfile.TemporaryDirectory(dir=a.out) as wd:
        # The reference and the measurement run side by side (both small).
        d = Daemon(a.nvshared, wd, ["--anti-thrashing", "auto", "--capacity",
                                    spec.get("capacity", "16G")])
        ref_p = c.start(c.env(extra=spec.get("ref_env")))
        alone_p = c.start(c.env(d.sock, instance=1))
        w = Watch()
        t0 = time.time()
        while alone_p.poll() is None and time.time() - t0 < 400:
            w.poll(d.sock)
            time.sleep(0.05)
        (ref_rc, ref_out), (alone_rc, alone_out) = finish([ref_p, alone_p], 400)
        d.stop()
        ref, alone = result_of(ref_out), result_of(alone_out)
        mem, pinned = w.biggest()
        if ref_rc != 0 or not ref or alone_rc != 0 or alone != ref or mem == 0:
            return False, (f"reference rc {ref_rc} {ref!r}, alone rc {alone_rc} {alone!r}, "
                           f"memory {mem >> 20} MiB | {ref_out[-300:]!r} | {alone_out[-400:]!r}")
        capacity = spec.get("capacity") or f"{mem * 3 // 2 >> 20}M"

    with tempfile.TemporaryDirectory(dir=a.out) as wd:
        d = Daemon(a.nvshared, wd, ["--anti-thrashing", "auto", "--capacity", capacity,
                                    "--time-quantum", "1s"])
        go = os.path.join(wd, "go")
        procs = [c.start(c.env(d.sock, {"NVS_BARRIER": go}, instance=2 + i)) for i in range(2)]
        w = Watch()
        t0 = time.time()
        while time.time() - t0 < 400 and any(p.poll() is None for p in procs):
            w.poll(d.sock)
            if not os.path.exists(go) and all(os.path.exists(f"{go}.{p.pid}") for p in procs):
                open(go, "w").close()
                t_go = time.time()
            time.sleep(0.05)
        outs = finish(procs, 60)
        elapsed = time.time() - (t_go if os.path.exists(go) else t0)
        rc = d.stop()
    results = [result_of(o) if code == 0 else None for code, o in outs]
    accounted = [w.memory.get(p.pid, 0) for p in procs]
    pinned_of = [w.pinned.get(p.pid, 0) for p in procs]
    kind = spec.get("kind")
    kind_ok = all(
        kind is None or (kind == "pinned" and pn >= m * 0.8) or (kind == "managed" and pn <= m * 0.1)
        for m, pn in zip(accounted, pinned_of))
    ok = (rc == 0 and all(r == ref for r in results) and w.serializing and w.settled and
          w.violations == 0 and all(m >= mem * 0.9 for m in accounted) and kind_ok)
    detail = (f"answer {ref!r} x2: {all(r == ref for r in results)}; alone accounted "
              f"{mem >> 20} MiB ({pinned >> 20} pinned); pair capacity {capacity}, accounted "
              f"{[m >> 20 for m in accounted]} MiB ({[p >> 20 for p in pinned_of]} pinned); "
              f"serializing {w.serializing} (settled to one holder {w.settled}, two holders "
              f"after that {w.violations} times); work phase {elapsed:.1f}s; daemon exit {rc}")
    if not ok:
        detail += " | " + " | ".join(o[-400:] for _, o in outs)
    return ok, detail


def run_mp_managed(a):
    path = os.path.join(a.out, "case-mp-managed.py")
    with open(path, "w") as f:
        f.write(MP_MANAGED)
    with tempfile.TemporaryDirectory(dir=a.out) as wd:
        d = Daemon(a.nvshared, wd, ["--anti-thrashing", "auto"])
        env = dict(os.environ, LD_PRELOAD=a.lib, NVSHARE_SOCKET=d.sock)
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, path], env=env, capture_output=True, text=True,
                               timeout=180)
            out, err, hung = p.stdout, p.stderr, False
        except subprocess.TimeoutExpired as e:
            out, err, hung = str(e.stdout), str(e.stderr), True
        d.stop()
    explained = [l for l in err.splitlines() if "NVSHARE_MANAGED=0" in l]
    ok = not hung and len(explained) == 1 and "joined" in out
    return ok, (f"{time.time() - t0:.1f}s, hung {hung}, explanation: "
                f"{explained[0] if explained else None!r}; stdout {out.strip()[-200:]!r}"
                + ("" if ok else f" | stderr {err[-600:]!r}"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvshared", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--only")
    ap.add_argument("--out", default=tempfile.gettempdir())
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)  # scenarios make their folders inside it
    failed = total = 0
    todo = list(CASES.items()) + [("torch-multiprocessing-managed-explains", None)]
    for name, spec in todo:
        if a.only and a.only not in name:
            continue
        total += 1
        t0 = time.time()
        try:
            ok, detail = run_mp_managed(a) if spec is None else run_case(a, name, spec)
        except Exception as e:  # a case's crash is its failure, not the suite's
            ok, detail = False, f"exception: {e!r}"
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} ({time.time() - t0:.0f}s): {detail}",
              flush=True)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
