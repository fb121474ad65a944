#!/usr/bin/env python3
"""Driver behaviour the swap engine and nvshared rely on, measured on the GPU
(bench/README.md, driver_probes.py). No nvshare is involved unless
--lib is given.

  driver_probes.py exit [--lib libnvshare.so]   when a process's GPU memory
      comes back: a PyTorch child holds device memory (and pinned host
      memory) with a bare socket descriptor to us, as libnvshare's; we time
      the socket's close (and whether the kernel had marked the process as
      exiting then: PF_EXITING in /proc/PID/stat), the process's end (a
      pidfd) and when nvidia-smi shows the memory free
  driver_probes.py unpin   what a process's pinned host memory costs at its
      exit: a child with 40 GiB of device memory and 0 or 24 GiB of host
      memory made as the swap engine makes it (huge pages in 512 MiB
      regions, touched by 8 threads, cuMemHostRegister) exits; or first
      unregisters and unmaps that memory itself (timed), then exits. We time
      its socket's close, its end (a pidfd) and when nvidia-smi shows its
      device memory free
  driver_probes.py reuse   cuMemCreate of device memory another process
      has just released (64 MiB chunks, 14 GiB of 70), at once and later
  driver_probes.py pin     cuMemCreate of host memory (pinning, 8 GiB):
      first time, again, beside another process's kernels, two processes
      at once
  driver_probes.py pinways  8 GiB of pinned host memory made each way the
      driver offers: cuMemCreate (host, host NUMA node 0; chunks of 64 MiB
      and of 512 MiB; from 1 and from 4 threads), cuMemHostAlloc, and
      cuMemHostRegister of anonymous memory (untouched; touched first by 8
      threads; with transparent huge pages), each timed whole
  driver_probes.py register  the parts of the fastest way: touching
      anonymous memory with huge pages from 1, 2, 4, 8 and 16 threads and
      with MAP_POPULATE; cuMemHostRegister of it whole and in 64 MiB pieces;
      copies of 8 GiB from the device into it and back, against copies into
      cuMemCreate host memory
  driver_probes.py access  granting access (cuMemSetAccess) to 8 GiB of
      device memory made and mapped in chunks of 64 MiB, 512 MiB and 2 GiB,
      one call per chunk and one for the whole range: with the GPU idle,
      while another process copies both ways at once, and while this
      process copies both ways on streams of its own; cuMemCreate and
      cuMemMap timed beside it
  driver_probes.py inplace  what keeping swapped-out memory mapped in place
      would cost against leaving it unmapped (libnvshare(8) SWITCHING):
      making 8 GiB of host-located VMM memory (cuMemCreate, 64 MiB chunks)
      against registered huge pages touched by 8 threads (the engine's way);
      per GiB, unmapping a device chunk alone against unmapping it and
      mapping a host-located chunk at its address with access for the GPU;
      and a CuPy reduction reading 8 GiB at the same address mapped to
      device memory, then to host-located memory (how fast work that slipped
      past the gate would run)
  driver_probes.py corun   what running saturating processes side by side
      costs against one at a time, and what NVML's per-process SM
      utilization (nvmlDeviceGetProcessUtilization) reads for each: PyTorch
      children passing over 4 GiB in bursts (busy seconds, idle seconds)
      alone and two at once; per case the passes a second (their sum for
      two), the mean SM utilization NVML gave each over the steady part and
      how far apart its samples came
"""
import argparse
import ctypes
import json
import multiprocessing as mp
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
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


# ---- unpin ------------------------------------------------------------------

UNPIN_CHILD = r"""
import ctypes, os, socket, sys, threading, time
path, dev_gib, host_gib, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_UNIX); s.connect(path)
fd = s.detach()  # a bare descriptor, as libnvshare's: only the exit closes it
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
d = ctypes.c_uint64()
assert cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(dev_gib << 30)) == 0
assert cu.cuMemsetD8_v2(d, 1, ctypes.c_size_t(dev_gib << 30)) == 0 and cu.cuCtxSynchronize() == 0
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
REGION = 512 << 20
regions = []
t0 = time.monotonic()
for _ in range(host_gib * 2):
    p = libc.mmap(None, REGION, 3, 0x22, -1, 0)
    libc.madvise(ctypes.c_void_p(p), ctypes.c_size_t(REGION), 14)  # MADV_HUGEPAGE
    libc.madvise(ctypes.c_void_p(p), ctypes.c_size_t(REGION), 10)  # MADV_DONTFORK
    part = REGION // 8
    ts = [threading.Thread(target=libc.memset, args=(ctypes.c_void_p(p + k * part), 0, ctypes.c_size_t(part)))
          for k in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert cu.cuMemHostRegister_v2(ctypes.c_void_p(p), ctypes.c_size_t(REGION), 1) == 0
    regions.append(p)
made = time.monotonic() - t0
unreg = unmap = 0.0
if mode == "unregister":
    t0 = time.monotonic()
    for p in regions:
        assert cu.cuMemHostUnregister(ctypes.c_void_p(p)) == 0
    t1 = time.monotonic()
    for p in regions:
        libc.munmap(ctypes.c_void_p(p), ctypes.c_size_t(REGION))
    unreg, unmap = t1 - t0, time.monotonic() - t1
os.write(fd, f"{made:.3f} {unreg:.3f} {unmap:.3f}\n".encode())
sys.exit(0)
"""


def unpin_case(dev_gib, host_gib, mode):
    path = os.path.join(tempfile.mkdtemp(), "s")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    base = used_mib()
    child = subprocess.Popen([sys.executable, "-c", UNPIN_CHILD, path, str(dev_gib), str(host_gib), mode])
    conn, _ = listener.accept()
    text = b""
    while not text.endswith(b"\n"):
        part = conn.recv(64)
        assert part, "the child ended before it was ready"
        text += part
    t0 = time.monotonic()
    made, unreg, unmap = (float(x) for x in text.split())
    pidfd = os.pidfd_open(child.pid)
    closed = ended = freed = None
    held = dev_gib << 10
    while None in (closed, ended, freed) and time.monotonic() - t0 < 60:
        ready, _, _ = select.select([conn, pidfd], [], [], 0.005)
        now = time.monotonic() - t0
        if conn in ready and closed is None and conn.recv(1) == b"":
            closed = now
        if pidfd in ready and ended is None:
            ended = now
        if freed is None and used_mib() - base < held // 10:
            freed = time.monotonic() - t0
    child.wait()
    rate = f"{host_gib / made:.1f} GiB/s" if host_gib else "-"
    print(f"{dev_gib} GiB device, {host_gib} GiB host ({mode}): host memory made at {rate}; "
          f"unregistered in {unreg:.3f} s, unmapped in {unmap:.3f} s; then socket closed at "
          f"{closed:.3f} s, process ended at {ended:.3f} s, memory free by {freed:.3f} s", flush=True)


def probe_unpin(_args):
    for host_gib, mode in ((0, "exit"), (24, "exit"), (24, "unregister"), (24, "exit"), (24, "unregister")):
        unpin_case(40, host_gib, mode)


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


# ---- pinways -----------------------------------------------------------------

PIN_BYTES = 8 << 30


def create_host(cu, chunk, count, location_type=2):
    """count chunks of `chunk` bytes of host memory; (handles, seconds)."""
    p = AllocProp()
    p.type = 1
    p.location.type = location_type  # 2 CU_MEM_LOCATION_TYPE_HOST, 3 HOST_NUMA (id 0)
    handles, t0 = [], time.monotonic()
    for _ in range(count):
        h = ctypes.c_uint64()
        if cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(chunk), ctypes.byref(p),
                          ctypes.c_ulonglong(0)) != 0:
            break
        handles.append(h.value)
    return handles, time.monotonic() - t0


def report(name, made, seconds):
    rate = made / seconds / 1e9 if seconds > 0 and made else 0.0
    print(f"{name}: {made >> 20} MiB in {seconds * 1000:.0f} ms = {rate:.2f} GB/s", flush=True)


def way_create(cu, chunk, threads=1, location_type=2):
    import threading
    per = PIN_BYTES // chunk // threads
    results = [None] * threads

    def one(k):
        cu.cuCtxSetCurrent(CTX)
        results[k] = create_host(cu, chunk, per, location_type)
    t0 = time.monotonic()
    ts = [threading.Thread(target=one, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    took = time.monotonic() - t0
    made = sum(len(r[0]) for r in results) * chunk
    for r in results:
        release(cu, r[0])
    return made, took


def anon(libc, size, huge):
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    ptr = libc.mmap(None, size, 3, 0x22, -1, 0)  # RW, MAP_PRIVATE|MAP_ANONYMOUS
    if huge:
        libc.madvise(ctypes.c_void_p(ptr), ctypes.c_size_t(size), 14)  # MADV_HUGEPAGE
    return ptr


def touch(libc, ptr, size, threads):
    import threading
    part = size // threads
    ts = [threading.Thread(target=libc.memset, args=(ctypes.c_void_p(ptr + k * part), 0,
                                                      ctypes.c_size_t(part)))
          for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def way_register(cu, libc, huge, touch_threads):
    ptr = anon(libc, PIN_BYTES, huge)
    t0 = time.monotonic()
    if touch_threads:
        touch(libc, ptr, PIN_BYTES, touch_threads)
    t1 = time.monotonic()
    r = cu.cuMemHostRegister_v2(ctypes.c_void_p(ptr), ctypes.c_size_t(PIN_BYTES), 0)
    t2 = time.monotonic()
    cu.cuMemHostUnregister(ctypes.c_void_p(ptr))
    libc.munmap(ctypes.c_void_p(ptr), ctypes.c_size_t(PIN_BYTES))
    return r, t1 - t0, t2 - t1


def probe_pinways(_args):
    global CTX
    cu = driver()
    CTX = ctypes.c_void_p()
    cu.cuCtxGetCurrent(ctypes.byref(CTX))
    libc = ctypes.CDLL(None, use_errno=True)
    report("cuMemCreate host, 64 MiB chunks", *way_create(cu, 64 << 20))
    report("cuMemCreate host, 64 MiB chunks, again", *way_create(cu, 64 << 20))
    report("cuMemCreate host, 512 MiB chunks", *way_create(cu, 512 << 20))
    report("cuMemCreate host NUMA 0, 64 MiB chunks", *way_create(cu, 64 << 20, 1, 3))
    report("cuMemCreate host, 64 MiB chunks, 4 threads", *way_create(cu, 64 << 20, 4))
    p = ctypes.c_void_p()
    t0 = time.monotonic()
    r = cu.cuMemHostAlloc(ctypes.byref(p), ctypes.c_size_t(PIN_BYTES), 0)
    took = time.monotonic() - t0
    report(f"cuMemHostAlloc (rc {r})", PIN_BYTES if r == 0 else 0, took)
    if r == 0:
        cu.cuMemFreeHost(p)
    for huge in (False, True):
        for threads in (0, 8):
            r, touched, registered = way_register(cu, libc, huge, threads)
            name = (f"cuMemHostRegister (rc {r}), {'huge pages' if huge else 'small pages'}, "
                    f"touched by {threads} threads first ({touched * 1000:.0f} ms)")
            report(name, PIN_BYTES if r == 0 else 0, registered)


# ---- register -----------------------------------------------------------------

def timed(f, *a):
    t0 = time.monotonic()
    r = f(*a)
    return r, time.monotonic() - t0


def copy_rate(cu, dst, src, size, stream):
    t0 = time.monotonic()
    for off in range(0, size, CHUNK):
        cu.cuMemcpyAsync(ctypes.c_uint64(dst + off), ctypes.c_uint64(src + off),
                         ctypes.c_size_t(CHUNK), stream)
    cu.cuStreamSynchronize(stream)
    return size / (time.monotonic() - t0) / 1e9


def probe_register(_args):
    cu = driver()
    libc = ctypes.CDLL(None, use_errno=True)
    size = PIN_BYTES
    for threads in (1, 2, 4, 8, 16):
        ptr = anon(libc, size, True)
        _, took = timed(touch, libc, ptr, size, threads)
        print(f"touch 8 GiB, huge pages, {threads} threads: {size / took / 1e9:.2f} GB/s",
              flush=True)
        libc.munmap(ctypes.c_void_p(ptr), ctypes.c_size_t(size))
    ptr = libc.mmap(None, size, 3, 0x22 | 0x8000, -1, 0)  # MAP_POPULATE, no advice
    libc.munmap(ctypes.c_void_p(ptr), ctypes.c_size_t(size))
    t0 = time.monotonic()
    ptr = libc.mmap(None, size, 3, 0x22 | 0x8000, -1, 0)
    print(f"MAP_POPULATE 8 GiB: {size / (time.monotonic() - t0) / 1e9:.2f} GB/s", flush=True)
    libc.munmap(ctypes.c_void_p(ptr), ctypes.c_size_t(size))
    ptr = anon(libc, size, True)
    touch(libc, ptr, size, 8)
    t0 = time.monotonic()
    for off in range(0, size, CHUNK):
        assert cu.cuMemHostRegister_v2(ctypes.c_void_p(ptr + off), ctypes.c_size_t(CHUNK), 0) == 0
    print(f"cuMemHostRegister in 64 MiB pieces: {size / (time.monotonic() - t0) / 1e9:.2f} GB/s",
          flush=True)
    dev = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(dev), ctypes.c_size_t(size)) == 0
    stream = ctypes.c_void_p()
    cu.cuStreamCreate(ctypes.byref(stream), 1)
    copy_rate(cu, ptr, dev.value, size, stream)  # warm
    out = copy_rate(cu, ptr, dev.value, size, stream)
    back = copy_rate(cu, dev.value, ptr, size, stream)
    print(f"copies, registered: out {out:.1f} GB/s, in {back:.1f} GB/s", flush=True)
    for off in range(0, size, CHUNK):
        cu.cuMemHostUnregister(ctypes.c_void_p(ptr + off))
    libc.munmap(ctypes.c_void_p(ptr), ctypes.c_size_t(size))
    hp = ctypes.c_void_p()
    assert cu.cuMemHostAlloc(ctypes.byref(hp), ctypes.c_size_t(size), 0) == 0
    copy_rate(cu, hp.value, dev.value, size, stream)
    out = copy_rate(cu, hp.value, dev.value, size, stream)
    back = copy_rate(cu, dev.value, hp.value, size, stream)
    print(f"copies, cuMemHostAlloc: out {out:.1f} GB/s, in {back:.1f} GB/s", flush=True)


# ---- access -------------------------------------------------------------------

ACCESS_BYTES = 8 << 30
COPY_BYTES = 2 << 30


class AccessDesc(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


def copier_buffers(cu):
    """Two streams, each with pinned host and device buffers: one copies out, one in."""
    out = []
    for _ in range(2):
        host, dev, stream = ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_void_p()
        assert cu.cuMemHostAlloc(ctypes.byref(host), ctypes.c_size_t(COPY_BYTES), 0) == 0
        assert cu.cuMemAlloc_v2(ctypes.byref(dev), ctypes.c_size_t(COPY_BYTES)) == 0
        assert cu.cuStreamCreate(ctypes.byref(stream), 1) == 0
        out.append((host.value, dev.value, stream))
    return out


def queue_copies(cu, bufs):
    (h0, d0, s0), (h1, d1, s1) = bufs
    for off in range(0, COPY_BYTES, CHUNK):
        cu.cuMemcpyAsync(ctypes.c_uint64(h0 + off), ctypes.c_uint64(d0 + off),
                         ctypes.c_size_t(CHUNK), s0)
        cu.cuMemcpyAsync(ctypes.c_uint64(d1 + off), ctypes.c_uint64(h1 + off),
                         ctypes.c_size_t(CHUNK), s1)


def copier(conn):
    cu = driver()
    bufs = copier_buffers(cu)
    conn.send("ready")
    while not conn.poll():
        queue_copies(cu, bufs)
        for _, _, s in bufs:
            cu.cuStreamSynchronize(s)
    conn.recv()


def access_round(cu, base, chunk, whole):
    """Create, map and grant access to ACCESS_BYTES at base in `chunk`s; ms of each."""
    p = AllocProp()
    p.type = 1
    p.location.type = 1
    desc = AccessDesc()
    desc.location.type = 1
    desc.flags = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    handles, t_create, t_map, t_access = [], 0.0, 0.0, 0.0
    for off in range(0, ACCESS_BYTES, chunk):
        h = ctypes.c_uint64()
        t0 = time.monotonic()
        assert cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(chunk), ctypes.byref(p),
                              ctypes.c_ulonglong(0)) == 0
        t1 = time.monotonic()
        assert cu.cuMemMap(ctypes.c_uint64(base + off), ctypes.c_size_t(chunk), ctypes.c_size_t(0),
                           h, ctypes.c_ulonglong(0)) == 0
        t2 = time.monotonic()
        t_create += t1 - t0
        t_map += t2 - t1
        handles.append(h)
        if not whole:
            assert cu.cuMemSetAccess(ctypes.c_uint64(base + off), ctypes.c_size_t(chunk),
                                     ctypes.byref(desc), ctypes.c_size_t(1)) == 0
            t_access += time.monotonic() - t2
    if whole:
        t0 = time.monotonic()
        assert cu.cuMemSetAccess(ctypes.c_uint64(base), ctypes.c_size_t(ACCESS_BYTES),
                                 ctypes.byref(desc), ctypes.c_size_t(1)) == 0
        t_access = time.monotonic() - t0
    cu.cuCtxSynchronize()
    for k, h in enumerate(handles):
        cu.cuMemUnmap(ctypes.c_uint64(base + k * chunk), ctypes.c_size_t(chunk))
        cu.cuMemRelease(h)
    return t_create * 1000, t_map * 1000, t_access * 1000


def access_table(cu, base, condition):
    gib = ACCESS_BYTES / (1 << 30)
    for chunk in (64 << 20, 512 << 20, 2 << 30):
        for whole in (False, True):
            c, m, a = access_round(cu, base, chunk, whole)
            print(f"{condition}: chunks of {chunk >> 20} MiB, access "
                  f"{'in one call' if whole else 'per chunk'}: create {c / gib:.2f}, map "
                  f"{m / gib:.2f}, access {a / gib:.2f} ms per GiB", flush=True)


def probe_access(_args):
    cu = driver()
    base = ctypes.c_uint64()
    assert cu.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(ACCESS_BYTES),
                                  ctypes.c_size_t(2 << 30), ctypes.c_uint64(0),
                                  ctypes.c_ulonglong(0)) == 0
    access_round(cu, base.value, 64 << 20, False)  # warm
    access_table(cu, base.value, "idle")
    a, b = mp.Pipe()
    other = mp.Process(target=copier, args=(b,))
    other.start()
    assert a.recv() == "ready"
    time.sleep(0.5)
    access_table(cu, base.value, "another process copying both ways")
    a.send("stop")
    other.join()
    bufs = copier_buffers(cu)
    ctx = ctypes.c_void_p()
    cu.cuCtxGetCurrent(ctypes.byref(ctx))
    stop = threading.Event()

    def copy_on():  # ctypes lets go of the GIL in each driver call
        cu.cuCtxSetCurrent(ctx)
        while not stop.is_set():
            queue_copies(cu, bufs)
            for _, _, s in bufs:
                cu.cuStreamSynchronize(s)

    thread = threading.Thread(target=copy_on)
    thread.start()
    time.sleep(0.5)
    access_table(cu, base.value, "this process copying both ways")
    stop.set()
    thread.join()


# ---- inplace ------------------------------------------------------------------

INPLACE_BYTES = 8 << 30


def vmm_chunks(cu, count, host):
    p = AllocProp()
    p.type = 1
    p.location.type = 2 if host else 1
    handles = []
    for _ in range(count):
        h = ctypes.c_uint64()
        assert cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(CHUNK), ctypes.byref(p),
                              ctypes.c_ulonglong(0)) == 0
        handles.append(h.value)
    return handles


def map_chunks(cu, base, handles):
    desc = AccessDesc()
    desc.location.type, desc.location.id, desc.flags = 1, 0, 3  # the device, read-write
    for k, h in enumerate(handles):
        va = ctypes.c_uint64(base + k * CHUNK)
        assert cu.cuMemMap(va, ctypes.c_size_t(CHUNK), ctypes.c_size_t(0), ctypes.c_uint64(h),
                           ctypes.c_ulonglong(0)) == 0
        assert cu.cuMemSetAccess(va, ctypes.c_size_t(CHUNK), ctypes.byref(desc),
                                 ctypes.c_size_t(1)) == 0


def unmap_chunks(cu, base, count):
    for k in range(count):
        assert cu.cuMemUnmap(ctypes.c_uint64(base + k * CHUNK), ctypes.c_size_t(CHUNK)) == 0


def read_rate(base, size):
    """GB/s of a CuPy sum over `size` bytes at `base` (median of 3)."""
    import cupy
    mem = cupy.cuda.UnownedMemory(base, size, owner=None)
    a = cupy.ndarray((size // 8,), dtype=cupy.uint64, memptr=cupy.cuda.MemoryPointer(mem, 0))
    a.sum()
    cupy.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        a.sum()
        cupy.cuda.runtime.deviceSynchronize()
        times.append(time.monotonic() - t0)
    return size / sorted(times)[1] / 1e9


def probe_inplace(_args):
    import cupy
    cupy.cuda.runtime.setDevice(0)
    cupy.zeros(1).sum()  # the primary context, which driver() makes current
    cu = driver()
    libc = ctypes.CDLL(None, use_errno=True)
    n = INPLACE_BYTES // CHUNK
    gib = INPLACE_BYTES / (1 << 30)
    base = ctypes.c_uint64()
    assert cu.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(INPLACE_BYTES),
                                  ctypes.c_size_t(0), ctypes.c_uint64(0),
                                  ctypes.c_ulonglong(0)) == 0
    base = base.value
    (host, made_s) = timed(vmm_chunks, cu, n, True)
    print(f"make host-located VMM memory, 8 GiB in 64 MiB chunks: {made_s * 1000:.0f} ms = "
          f"{INPLACE_BYTES / made_s / 1e9:.2f} GB/s", flush=True)
    r, touched, registered = way_register(cu, libc, True, 8)
    print(f"make registered huge pages (rc {r}), 8 GiB: touched by 8 threads "
          f"{touched * 1000:.0f} ms + registered {registered * 1000:.0f} ms = "
          f"{INPLACE_BYTES / (touched + registered) / 1e9:.2f} GB/s", flush=True)
    device = vmm_chunks(cu, n, False)
    map_chunks(cu, base, device)
    dev_rate = read_rate(base, INPLACE_BYTES)
    _, unmap_s = timed(unmap_chunks, cu, base, n)
    map_chunks(cu, base, device)
    t0 = time.monotonic()
    unmap_chunks(cu, base, n)
    map_chunks(cu, base, host)
    remap_s = time.monotonic() - t0
    host_rate = read_rate(base, INPLACE_BYTES)
    print(f"at a swap-out, per GiB: unmap {unmap_s * 1000 / gib:.2f} ms; unmap and map "
          f"host-located memory in place {remap_s * 1000 / gib:.2f} ms", flush=True)
    print(f"a CuPy sum reading 8 GiB: device memory {dev_rate:.0f} GB/s; host-located memory "
          f"mapped in place {host_rate:.1f} GB/s ({dev_rate / host_rate:.0f}x slower)", flush=True)
    unmap_chunks(cu, base, n)
    release(cu, host)
    release(cu, device)
    cu.cuMemAddressFree(ctypes.c_uint64(base), ctypes.c_size_t(INPLACE_BYTES))


# ---- corun ------------------------------------------------------------------

CORUN_CHILD = r"""
import json, sys, time
import torch
gib, busy, idle, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
xs = [torch.ones(1 << 28, device="cuda") for _ in range(gib)]
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
start = time.time()
passes = 0
while time.time() - start < seconds:
    burst = time.time()
    while time.time() - burst < busy and time.time() - start < seconds:
        for x in xs:
            x.mul_(-1).add_(1)
        torch.cuda.synchronize()
        passes += 1
    if idle > 0:
        time.sleep(idle)
end = time.time()
ok = all(bool((x == 1).all()) or bool((x == 0).all()) for x in xs)
print(json.dumps({"start": start, "end": end, "passes": passes, "ok": ok}), flush=True)
"""


class NvmlSample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class NvmlUtil:
    """nvmlDeviceGetProcessUtilization of GPU 0, read every `period` s on a thread."""

    def __init__(self, period=0.1):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        assert self.lib.nvmlInit_v2() == 0
        self.dev = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.dev)) == 0
        self.samples = []  # (pid, timestamp us, smUtil)
        self.errors = {}
        self.period = period
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def read(self, last):
        count = ctypes.c_uint(64)
        buf = (NvmlSample * 64)()
        r = self.lib.nvmlDeviceGetProcessUtilization(self.dev, buf, ctypes.byref(count),
                                                     ctypes.c_ulonglong(last))
        if r != 0:
            self.errors[r] = self.errors.get(r, 0) + 1
            return []
        return [(s.pid, s.timeStamp, s.smUtil) for s in buf[:count.value]]

    def run(self):
        last = 0
        while not self.stop:
            got = self.read(last)
            self.samples.extend(got)
            if got:
                last = max(ts for _, ts, _ in got)
            time.sleep(self.period)

    def of(self, pid, start, end):
        """Mean smUtil of `pid`'s samples timestamped in [start, end] (seconds), and the median
        gap between its samples (ms)."""
        got = sorted({(ts, sm) for p, ts, sm in self.samples if p == pid and start * 1e6 <= ts <= end * 1e6})
        if not got:
            return None, None
        gaps = sorted(b[0] - a[0] for a, b in zip(got, got[1:]))
        return (sum(sm for _, sm in got) / len(got),
                gaps[len(gaps) // 2] / 1000 if gaps else None)


def corun_case(nvml, name, jobs, gib=4, seconds=8.0):
    children = [subprocess.Popen([sys.executable, "-c", CORUN_CHILD, str(gib), str(busy), str(idle),
                                  str(seconds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for busy, idle in jobs]
    for c in children:
        assert c.stdout.readline().strip() == "ready", "a child failed to start"
    for c in children:
        c.stdin.write("go\n")
        c.stdin.flush()
    results = []
    for c in children:
        line = c.stdout.readline()
        c.wait()
        results.append(json.loads(line))
    time.sleep(2 * nvml.period)
    rates, utils = [], []
    for c, r in zip(children, results):
        rates.append(r["passes"] / (r["end"] - r["start"]))
        util, gap = nvml.of(c.pid, r["start"] + 1.0, r["end"] - 0.2)
        utils.append("-" if util is None else f"{util:.0f}% (samples {gap:.0f} ms apart)"
                     if gap is not None else f"{util:.0f}%")
        assert r["ok"], "a child's data was wrong"
    print(f"{name}: passes/s {' + '.join(f'{x:.1f}' for x in rates)} = {sum(rates):.1f}; "
          f"NVML SM utilization {', '.join(utils)}", flush=True)
    return sum(rates)


def probe_corun(_args):
    nvml = NvmlUtil()
    alone = corun_case(nvml, "one, saturating", [(60.0, 0.0)])
    two = corun_case(nvml, "two, saturating, at once", [(60.0, 0.0), (60.0, 0.0)])
    print(f"two at once do {two / alone:.3f} of the passes one alone does", flush=True)
    corun_case(nvml, "one, 0.5 s busy / 0.25 s idle", [(0.5, 0.25)], seconds=9.0)
    corun_case(nvml, "one, 0.5 s busy / 1 s idle", [(0.5, 1.0)], seconds=9.0)
    corun_case(nvml, "one, 0.01 s busy / 0.25 s idle", [(0.01, 0.25)], seconds=9.0)
    corun_case(nvml, "two, 0.5 s busy / 0.25 s idle, at once", [(0.5, 0.25), (0.5, 0.25)], seconds=9.0)
    corun_case(nvml, "one saturating, one 0.5 s busy / 1 s idle", [(60.0, 0.0), (0.5, 1.0)], seconds=9.0)
    nvml.stop = True
    if nvml.errors:
        # 6 (NVML_ERROR_NOT_FOUND) is no sample since the last read: the GPU was idle.
        print(f"NVML calls that returned no samples (return code: count): {nvml.errors}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probe", choices=["exit", "unpin", "reuse", "pin", "pinways", "register", "access", "inplace", "corun"])
    ap.add_argument("--lib", help="exit: also a child with this libnvshare.so (no nvshared)")
    args = ap.parse_args()
    mp.set_start_method("spawn")
    {"exit": probe_exit, "unpin": probe_unpin, "reuse": probe_reuse, "pin": probe_pin,
     "pinways": probe_pinways, "register": probe_register,
     "access": probe_access, "inplace": probe_inplace, "corun": probe_corun}[args.probe](args)


if __name__ == "__main__":
    main()
