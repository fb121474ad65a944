#!/usr/bin/env python3
"""Driver behaviour the swap engine and nvshared rely on, measured on the GPU
(bench/README.md, "Oversubscription"). No nvshare is involved unless
--lib is given.

  driver_probes.py exit [--lib libnvshare.so]   when a process's GPU memory
      comes back: a PyTorch child holds device memory (and pinned host
      memory) with a bare socket descriptor to us, as libnvshare's; we time
      the socket's close (and whether the kernel had marked the process as
      exiting then: PF_EXITING in /proc/PID/stat), the process's end (a
      pidfd) and when nvidia-smi shows the memory free
  driver_probes.py reuse   cuMemCreate of device memory another process
      has just released (64 MiB chunks, 14 GiB of 70), at once and later
  driver_probes.py pin     cuMemCreate of host memory (pinning, 8 GiB):
      first time, again, beside another process's kernels, two processes
      at once
"""
import argparse
import ctypes
import multiprocessing as mp
import os
import select
import socket
import subprocess
import sys
import tempfile
import time

CHUNK = 64 << 20
PF_EXITING = 0x4


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", AllocFlags)]


def driver():
    cu = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    return cu


def create(cu, n, host=False):
    """n chunks; (handles, seconds, slowest chunk's seconds)."""
    p = AllocProp()
    p.type = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
    p.location.type = 2 if host else 1  # CU_MEM_LOCATION_TYPE_HOST / _DEVICE
    handles, slowest, t0 = [], 0.0, time.monotonic()
    for _ in range(n):
        h, t = ctypes.c_uint64(), time.monotonic()
        if cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(CHUNK), ctypes.byref(p),
                          ctypes.c_ulonglong(0)) != 0:
            break
        slowest = max(slowest, time.monotonic() - t)
        handles.append(h.value)
    return handles, time.monotonic() - t0, slowest


def release(cu, handles):
    for h in handles:
        cu.cuMemRelease(ctypes.c_uint64(h))


def gbs(n_chunks, seconds):
    return n_chunks * CHUNK / seconds / 1e9 if seconds > 0 else 0.0


# ---- exit -------------------------------------------------------------------

EXIT_CHILD = r'''
import os, socket, sys, torch
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
fd = s.detach()  # a bare descriptor, as libnvshare's: only the exit closes it
x = torch.empty(int(sys.argv[2]) << 30, dtype=torch.uint8, device="cuda"); x.fill_(1)
pinned = int(sys.argv[3])
h = torch.empty(pinned << 30, dtype=torch.uint8, pin_memory=True) if pinned else None
torch.cuda.synchronize()
os.write(fd, b"r")
sys.exit(0)
'''


def used_mib():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                          "-i", "0"], capture_output=True, text=True).stdout
    return int(out.split()[0])


def exiting(pid):
    try:
        text = open(f"/proc/{pid}/stat").read()
        return bool(int(text[text.rindex(")") + 2:].split()[6]) & PF_EXITING)
    except (OSError, ValueError, IndexError):
        return None  # gone


def exit_case(name, gib, pinned_gib, env):
    path = os.path.join(tempfile.mkdtemp(), "s")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    base = used_mib()
    child = subprocess.Popen([sys.executable, "-c", EXIT_CHILD, path, str(gib), str(pinned_gib)],
                             env=env)
    conn, _ = listener.accept()
    assert conn.recv(1) == b"r"
    held = used_mib() - base
    pidfd = os.pidfd_open(child.pid)
    t0 = time.monotonic()
    closed = ended = freed = None
    was_exiting = None
    while None in (closed, ended, freed) and time.monotonic() - t0 < 60:
        ready, _, _ = select.select([conn, pidfd], [], [], 0.005)
        now = time.monotonic() - t0
        if conn in ready and closed is None and conn.recv(1) == b"":
            closed, was_exiting = now, exiting(child.pid)
        if pidfd in ready and ended is None:
            ended = now
        if freed is None and used_mib() - base < held // 10:
            freed = time.monotonic() - t0
    child.wait()
    print(f"{name}: {held} MiB on the GPU; socket closed at {closed:.3f} s (exiting: {was_exiting}), "
          f"process ended at {ended:.3f} s, memory free by {freed:.3f} s", flush=True)


def probe_exit(args):
    env = dict(os.environ)
    exit_case("40 GiB", 40, 0, env)
    exit_case("8 GiB", 8, 0, env)
    exit_case("40 GiB + 14 GiB pinned", 40, 14, env)
    if args.lib:
        env = dict(env, LD_PRELOAD=os.path.abspath(args.lib), NVSHARE_SOCKET="/nonexistent/s")
        exit_case("libnvshare.so, no nvshared: 40 GiB + 14 GiB pinned", 40, 14, env)


# ---- reuse ------------------------------------------------------------------

def reuse_other(conn):
    cu = driver()
    conn.send("ready")
    while (msg := conn.recv()) != "quit":
        time.sleep(msg)
        handles, took, slowest = create(cu, (14 << 30) // CHUNK)
        print(f"B: 14 GiB {msg:.1f} s after A released it: {took * 1000:.0f} ms "
              f"({gbs(len(handles), took):.0f} GB/s), slowest chunk {slowest * 1000:.1f} ms",
              flush=True)
        conn.send("created")
        conn.recv()
        release(cu, handles)
        conn.send("released")


def probe_reuse(_args):
    a, b = mp.Pipe()
    other = mp.Process(target=reuse_other, args=(b,))
    other.start()
    assert a.recv() == "ready"
    cu = driver()
    n_move = (14 << 30) // CHUNK
    handles, took, _ = create(cu, (70 << 30) // CHUNK)
    print(f"A: 70 GiB in {took * 1000:.0f} ms", flush=True)
    for delay in (0.0, 0.0, 2.0, 0.0, 5.0):
        release(cu, handles[-n_move:])
        handles = handles[:-n_move]
        a.send(delay)
        a.recv()
        a.send("release")
        a.recv()
        more, took, slowest = create(cu, n_move)
        print(f"A: 14 GiB at once after B released it: {took * 1000:.0f} ms, slowest chunk "
              f"{slowest * 1000:.1f} ms", flush=True)
        handles += more
    release(cu, handles[-n_move:])
    handles = handles[:-n_move]
    more, took, _ = create(cu, n_move)
    print(f"A: its own 14 GiB again at once: {took * 1000:.0f} ms", flush=True)
    a.send("quit")
    other.join()


# ---- pin --------------------------------------------------------------------

def pin_rate(cu, n=128):
    handles, took, _ = create(cu, n, host=True)
    release(cu, handles)
    return gbs(len(handles), took)


def pin_other(q):
    cu = driver()
    q.put("ready")
    q.get()
    q.put(pin_rate(cu))


BUSY = r'''
import sys, time, torch
x = torch.randn(8192, 8192, device="cuda")
print("busy", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
'''


def probe_pin(_args):
    cu = driver()
    print(f"first time: {pin_rate(cu):.2f} GB/s", flush=True)
    print(f"again: {pin_rate(cu):.2f} GB/s", flush=True)
    busy = subprocess.Popen([sys.executable, "-c", BUSY, "20"], stdout=subprocess.PIPE, text=True)
    busy.stdout.readline()
    time.sleep(1)
    print(f"beside another process's kernels: {pin_rate(cu):.2f} GB/s", flush=True)
    busy.kill()
    busy.wait()
    q = mp.Queue()
    other = mp.Process(target=pin_other, args=(q,))
    other.start()
    q.get()
    q.put("go")
    mine = pin_rate(cu)
    theirs = q.get()
    other.join()
    print(f"two processes at once: {mine:.2f} + {theirs:.2f} GB/s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probe", choices=["exit", "reuse", "pin"])
    ap.add_argument("--lib", help="exit: also a child with this libnvshare.so (no nvshared)")
    args = ap.parse_args()
    mp.set_start_method("spawn")
    {"exit": probe_exit, "reuse": probe_reuse, "pin": probe_pin}[args.probe](args)


if __name__ == "__main__":
    main()
