#!/usr/bin/env python3
"""One scrape of nvshare-metrics, socket-activated (issue 16).

The real nvshared and real clients; nvshare-metrics --http behind
systemd-socket-activate --accept --inetd (each connection on its stdin and
stdout, as nvshare-metrics@.service gets it); the answer parsed by
prometheus_client's text-format parser.

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
    listen(): a loaded machine can come between (seen in CI)."""
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


def main():
    tmp = tempfile.mkdtemp(prefix="nvshare-metrics-")
    sock = os.path.join(tmp, "nvshare.sock")
    endpoint = os.path.join(tmp, "metrics.sock")
    os.makedirs(os.path.join(tmp, "gpus"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID")}
    procs = []
    try:
        procs.append(subprocess.Popen([NVSHARED, "--socket", sock, "--no-bus", "--anti-thrashing",
                                       "on", "--gpu-info-dir", os.path.join(tmp, "gpus")],
                                      env=env, stderr=subprocess.DEVNULL))
        wait_path(sock)
        # Two clients, two grants each, then gone: the counts must outlive them.
        for comm in ("one", "two"):
            r = subprocess.run([TESTCLIENT, "--socket", sock, "--comm", comm, "--cycles", "2",
                                "--hold", "10ms"], capture_output=True, timeout=30)
            if r.returncode != 0:
                print("FAIL: testclient:", r.stdout.decode(), r.stderr.decode())
                return 1
        status = json.loads(subprocess.run([NVSHARECTL, "--socket", sock, "socket-status"],
                                           capture_output=True, check=True,
                                           timeout=30).stdout)
        uuid = status["gpus"][0]["uuid"]
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
                samples[(s.name, s.labels.get("gpu"), s.labels.get("user"))] = s.value
        expected = {
            ("nvshare_up", None, None): 1,
            ("nvshare_grants_total", uuid, "root"): 4,
            ("nvshare_clients", uuid, "root"): 0,
            ("nvshare_waiting", uuid, "root"): 0,
            ("nvshare_revocations_total", uuid, "root"): 0,
        }
        for key, value in expected.items():
            if samples.get(key) != value:
                failures.append(f"{key} = {samples.get(key)}, want {value}")
        held = samples.get(("nvshare_held_seconds_total", uuid, "root"), 0)
        if not held >= 0.04:  # four holds of at least 10 ms
            failures.append(f"nvshare_held_seconds_total = {held}, want >= 0.04")
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
