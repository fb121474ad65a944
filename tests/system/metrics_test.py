#!/usr/bin/env python3
"""One scrape of nvshare-metrics, socket-activated (issues 16 and 45).

The real nvshared and real clients, one of them holding the GPU and one
waiting at the scrape; nvshare-metrics --http behind
systemd-socket-activate --accept --inetd (each connection on its stdin and
stdout, as nvshare-metrics@.service gets it); the answer parsed by
prometheus_client's text-format parser. Every per-GPU series must carry
DCGM exporter's GPU labels (gpu, UUID, modelName, Hostname).

Usage: metrics_test.py NVSHARED TESTCLIENT NVSHARE_METRICS NVSHARECTL
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from checks import wait_path  # beside this script

SKIP = 77
NVSHARED, TESTCLIENT, METRICS, NVSHARECTL = sys.argv[1:5]

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("SKIP: python3-prometheus-client is not installed")
    sys.exit(SKIP)
ACTIVATE = shutil.which("systemd-socket-activate")
if ACTIVATE is None:
    print("SKIP: no systemd-socket-activate")
    sys.exit(SKIP)


def connect(path, limit=20.0):
    """The socket file exists from bind(), connections succeed only from
    listen(): on a loaded machine a client can come between."""
    deadline = time.monotonic() + limit
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(20)
        try:
            s.connect(path)
            return s
        except ConnectionRefusedError:
            s.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def scrape(path):
    s = connect(path)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return data.decode()


def gpu_labels(status):
    """The GPU's labels as DCGM exporter gives them (NODE_NAME is unset)."""
    gpu = status["gpus"][0]
    return {"gpu": str(gpu["index"]), "UUID": gpu["uuid"], "modelName": gpu["name"],
            "Hostname": socket.gethostname()}


def socket_status(sock):
    return json.loads(subprocess.run([NVSHARECTL, "--socket", sock, "socket-status"],
                                     capture_output=True, check=True, timeout=30).stdout)


def wait_status(sock, ready, limit=20.0):
    deadline = time.monotonic() + limit
    while True:
        status = socket_status(sock)
        if ready(status) or time.monotonic() >= deadline:
            return status
        time.sleep(0.05)


def concurrent_scrapes(sock, cache, count):
    """How many of `count` nvshare-metrics run at once as nobody (nvshared
    answers a user 20 status queries a second, 20 at once) report
    nvshare_up 1; `cache` is their --cache-dir, or None."""
    def as_nobody():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    extra = ["--cache-dir", cache] if cache else []
    procs = [subprocess.Popen([METRICS, "--socket", sock] + extra, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, preexec_fn=as_nobody)
             for _ in range(count)]
    up = 0
    for p in procs:
        out, _ = p.communicate(timeout=120)
        up += "\nnvshare_up 1\n" in "\n" + out.decode()
    return up


def main():
    tmp = tempfile.mkdtemp(prefix="nvshare-metrics-")
    sock = os.path.join(tmp, "nvshare.sock")
    endpoint = os.path.join(tmp, "metrics.sock")
    os.makedirs(os.path.join(tmp, "gpus"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "NODE_NAME")}
    procs = []
    try:
        procs.append(subprocess.Popen([NVSHARED, "--socket", sock, "--no-bus", "--anti-thrashing",
                                       "on", "--time-quantum", "120s", "--gpu-info-dir",
                                       os.path.join(tmp, "gpus")],
                                      env=env, stderr=subprocess.DEVNULL))
        wait_path(sock)
        # Two clients, two grants each, then gone: the counts must outlive them.
        for comm in ("one", "two"):
            r = subprocess.run([TESTCLIENT, "--socket", sock, "--comm", comm, "--cycles", "2",
                                "--hold", "10ms"], capture_output=True, timeout=30)
            if r.returncode != 0:
                print("FAIL: testclient:", r.stdout.decode(), r.stderr.decode())
                return 1
        # Then one holding and one waiting, in this process's unit.
        procs.append(subprocess.Popen([TESTCLIENT, "--socket", sock, "--comm", "holder",
                                       "--hold-until-stdin"], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, env=env))
        wait_status(sock, lambda st: st["gpus"] and st["gpus"][0]["holders"])
        procs.append(subprocess.Popen([TESTCLIENT, "--socket", sock, "--comm", "waiter"],
                                      stdout=subprocess.DEVNULL, env=env))
        status = wait_status(sock, lambda st: st["gpus"][0]["queue"])
        labels = gpu_labels(status)
        units = {c["cgroup"] for c in status["clients"]}
        procs.append(subprocess.Popen([ACTIVATE, "--accept", "--inetd", "-l", endpoint, METRICS,
                                       "--http", "--socket", sock], env=env))
        wait_path(endpoint)
        response = scrape(endpoint)
        head, _, body = response.partition("\r\n\r\n")
        failures = []
        if not head.startswith("HTTP/1.0 200 OK") or "version=0.0.4" not in head:
            failures.append(f"bad response head: {head!r}")
        samples = {}
        for family in text_string_to_metric_families(body):
            for s in family.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
                if s.name in ("nvshare_up", "nvshare_build_info"):
                    continue
                if any(s.labels.get(k) != v for k, v in labels.items()):
                    failures.append(f"{s.name}{s.labels}: want the GPU labels {labels}")

        def value(name, **extra):
            return samples.get((name, tuple(sorted({**labels, **extra}.items()))))

        gpu = status["gpus"][0]
        expected = [
            (samples.get(("nvshare_up", ())), 1, "nvshare_up"),
            (samples.get(("nvshare_build_info", (("version", status["version"]),))), 1,
             "nvshare_build_info"),
            (value("nvshare_grants_total", user="root"), 5, "nvshare_grants_total"),
            (value("nvshare_clients", user="root"), 2, "nvshare_clients"),
            (value("nvshare_waiting", user="root"), 1, "nvshare_waiting"),
            (value("nvshare_revocations_total", user="root"), 0, "nvshare_revocations_total"),
            (value("nvshare_gpu_capacity_bytes"), gpu["capacity"], "nvshare_gpu_capacity_bytes"),
            (value("nvshare_gpu_physical_memory_bytes"), gpu["physical_memory"],
             "nvshare_gpu_physical_memory_bytes"),
            (value("nvshare_gpu_requested_memory_bytes"), gpu["requested_memory"],
             "nvshare_gpu_requested_memory_bytes"),
            (value("nvshare_gpu_holders"), 1, "nvshare_gpu_holders"),
            (value("nvshare_gpu_queue_length"), 1, "nvshare_gpu_queue_length"),
            (value("nvshare_gpu_serializing"), int(gpu["serializing"]),
             "nvshare_gpu_serializing"),
            (value("nvshare_gpu_oversubscribed"), 0, "nvshare_gpu_oversubscribed"),
            (value("nvshare_gpu_time_quantum_seconds"), 120, "nvshare_gpu_time_quantum_seconds"),
            (value("nvshare_gpu_mode", mode="on"), 1, "nvshare_gpu_mode{mode=on}"),
            (value("nvshare_gpu_mode", mode="off"), 0, "nvshare_gpu_mode{mode=off}"),
            (value("nvshare_gpu_mode", mode="auto"), 0, "nvshare_gpu_mode{mode=auto}"),
        ]
        if len(units) != 1:
            failures.append(f"the clients' units {units}: want one")
        else:
            unit = units.pop()
            expected += [
                (value("nvshare_unit_clients", unit=unit), 2, f"nvshare_unit_clients{{{unit}}}"),
                (value("nvshare_unit_waiting", unit=unit), 1, f"nvshare_unit_waiting{{{unit}}}"),
            ]
        for got, want, what in expected:
            if got != want:
                failures.append(f"{what} = {got}, want {want}")
        held = value("nvshare_held_seconds_total", user="root") or 0
        if not held >= 0.04:  # four holds of at least 10 ms
            failures.append(f"nvshare_held_seconds_total = {held}, want >= 0.04")
        # A burst of scrapes (issue 47: 98 of 256 at once reported
        # nvshare_up 0): sharing one answer through the cache directory, as
        # nvshare-metrics@.service does, every one of them sees nvshared.
        if os.geteuid() == 0:
            os.chmod(tmp, 0o755)
            cache = os.path.join(tmp, "cache")
            os.mkdir(cache, 0o700)
            os.chown(cache, 65534, 65534)
            up = concurrent_scrapes(sock, cache, 256)
            print(f"{up} of 256 scrapes at once saw nvshared (shared through --cache-dir)")
            if up != 256:
                failures.append(f"{256 - up} of 256 scrapes at once reported nvshare_up 0")
        else:
            print("not root: the scrapes at once as another user are not tried")
        for f in failures:
            print("FAIL:", f)
        if failures:
            print(body)
        return 1 if failures else 0
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()
        shutil.rmtree(tmp)


sys.exit(main())
