#!/usr/bin/env python3
"""nvshared's journal records, captured off the wire (issue 16).

In a private mount namespace a tmpfs covers /run, and this test binds its
own datagram socket at /run/systemd/journal/socket, where sd-journal sends.
nvshared runs with JOURNAL_STREAM naming its stderr, as under systemd. A
client that ignores the Drop is revoked and a second one waits, then is
granted: each event must arrive as one record with its MESSAGE_ID,
PRIORITY=6 and the NVSHARE_* fields. There --log-waits-after 0 logs the wait
at once. Then, under --log-waits-after 1h, a client that waits until the
holder lets go is granted with no record of its wait. Needs root (for the
namespace).

Usage: journal_test.py NVSHARED TESTCLIENT MESSAGE_IDS_H
"""
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77
NVSHARED, TESTCLIENT, IDS_HEADER = sys.argv[1:4]


def message_ids():
    text = open(IDS_HEADER).read()
    return {name: value for name, value in re.findall(r'k(\w+) = "([0-9a-f]{32})"', text)}


def parse_record(data):
    """The native journal protocol: KEY=value\\n, or KEY\\n + u64 LE length + data + \\n."""
    fields = []
    i = 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            key, value = line.split(b"=", 1)
            i = nl + 1
        else:
            key = line
            (n,) = struct.unpack_from("<Q", data, nl + 1)
            start = nl + 1 + 8
            value = data[start:start + n]
            i = start + n + 1
        fields.append((key.decode(), value.decode()))
    return fields


# What read_event read past the line it returned, by file descriptor.
UNREAD = {}


def read_event(client, name, end):
    """The next line of a test client's that reports event `name`; None at `end`."""
    fd = client.stdout.fileno()
    buffered = UNREAD.pop(fd, b"")
    while True:
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            fields = line.decode().split()
            if len(fields) > 1 and fields[1] == name:
                UNREAD[fd] = buffered
                return line.decode()
        if time.monotonic() >= end:
            return None
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buffered += chunk


def main():
    if os.environ.get("NVSHARE_JOURNAL_NS") != "1":
        if os.geteuid() != 0 or not shutil.which("unshare"):
            print("SKIP: needs root and unshare for a private /run")
            return SKIP
        r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                            __file__] + sys.argv[1:],
                           env=dict(os.environ, NVSHARE_JOURNAL_NS="1"))
        return r.returncode
    # Only inside our namespace: the host's /run is untouched.
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run"], check=True)
    os.makedirs("/run/systemd/journal")
    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    journal.bind("/run/systemd/journal/socket")

    tmp = tempfile.mkdtemp(prefix="nvshare-journal-")
    sock = os.path.join(tmp, "nvshare.sock")
    os.makedirs(os.path.join(tmp, "gpus"))
    err = open(os.path.join(tmp, "stderr"), "w")
    st = os.fstat(err.fileno())
    env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    env.pop("NOTIFY_SOCKET", None)

    def start_daemon(*args):
        if os.path.exists(sock):
            os.unlink(sock)
        return subprocess.Popen([NVSHARED, "--socket", sock, "--no-bus", "--anti-thrashing", "on",
                                 "--gpu-info-dir", os.path.join(tmp, "gpus")] + list(args),
                                stderr=err, env=env)

    daemon = start_daemon("--time-quantum", "1500ms", "--grace", "500ms",
                          "--log-waits-after", "0")
    daemons = [daemon]
    clients = []
    records = []
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        holder = subprocess.Popen([TESTCLIENT, "--socket", sock, "--comm", "holder",
                                   "--hold-until-stdin", "--ignore-drop"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        clients.append(holder)

        # One generous deadline for all the records: a failing run ends soon.
        end = time.monotonic() + 20

        def until(pred):
            while True:
                found = [r for r in records if pred(r)]
                if found:
                    return found[0]
                if time.monotonic() >= end:
                    return None
                ready, _, _ = select.select([journal], [], [], 0.2)
                if ready:
                    records.append(dict(parse_record(journal.recv(65536))))

        ids = message_ids()
        granted = until(lambda r: r.get("MESSAGE_ID") == ids["Granted"])
        waiter = subprocess.Popen([TESTCLIENT, "--socket", sock, "--comm", "waiter"],
                                  stdout=subprocess.PIPE)
        clients.append(waiter)
        waiting = until(lambda r: r.get("MESSAGE_ID") == ids["Waiting"])
        drop = until(lambda r: r.get("MESSAGE_ID") == ids["Drop"])
        revoked = until(lambda r: r.get("MESSAGE_ID") == ids["Revoked"])
        granted2 = until(lambda r: r.get("MESSAGE_ID") == ids["Granted"] and
                         r.get("NVSHARE_COMM") == "waiter")
        registered = until(lambda r: r.get("MESSAGE_ID") == ids["Registered"])
        failures = []

        def expect(record, what, **fields):
            if record is None:
                failures.append(f"no {what} record; got {records}")
                return
            for key, value in dict(PRIORITY="6", SYSLOG_IDENTIFIER="nvshared", **fields).items():
                if record.get(key) != value:
                    failures.append(f"{what}: {key}={record.get(key)!r}, want {value!r}: {record}")
            if not record.get("NVSHARE_GPU_UUID", "").startswith("GPU-"):
                failures.append(f"{what}: no NVSHARE_GPU_UUID: {record}")

        h, w = str(holder.pid), str(waiter.pid)
        expect(registered, "registered", NVSHARE_PID=h, NVSHARE_COMM="holder", NVSHARE_UID="0",
               OBJECT_PID=h)
        if " --comm holder" not in (registered or {}).get("NVSHARE_COMMAND", ""):
            failures.append(f"registered: NVSHARE_COMMAND is not the holder's command line: "
                            f"{registered}")
        expect(granted, "granted", NVSHARE_PID=h, NVSHARE_COMM="holder", NVSHARE_UID="0")
        expect(waiting, "waiting", NVSHARE_PID=w, NVSHARE_COMM="waiter", OBJECT_PID=w)
        expect(drop, "drop", NVSHARE_PID=h, NVSHARE_COMM="holder")
        expect(revoked, "revoked", NVSHARE_PID=h, NVSHARE_CAUSE="grace-expired")
        expect(granted2, "second grant", NVSHARE_PID=w)
        # Journal records are not written to stderr a second time.
        err.flush()
        if "revoked the lock" in open(os.path.join(tmp, "stderr")).read():
            failures.append("the revocation also went to stderr")

        # A long threshold: a wait longer than the default threshold (1s)
        # but far shorter than this one is not logged.
        daemon.kill()
        daemon.wait()
        daemon = start_daemon("--time-quantum", "24h", "--log-waits-after", "1h")
        daemons.append(daemon)
        deadline = time.monotonic() + 10
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        end = time.monotonic() + 20
        holder = subprocess.Popen([TESTCLIENT, "--socket", sock, "--comm", "holder2",
                                   "--hold-until-stdin"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        clients.append(holder)
        if read_event(holder, "grant", end) is None:
            failures.append("the second holder was not granted")
        waiter = subprocess.Popen([TESTCLIENT, "--socket", sock, "--comm", "waiter2"],
                                  stdout=subprocess.PIPE)
        clients.append(waiter)
        if read_event(holder, "contended", end) is None:
            failures.append("the second holder never heard that somebody waits")
        # The client's clock is CLOCK_MONOTONIC, as is Python's.
        request = read_event(waiter, "request", end)
        if request is not None:
            time.sleep(max(0, int(request.split()[0]) / 1e9 + 1.5 - time.monotonic()))
        holder.stdin.write(b"\n")
        holder.stdin.flush()
        w = str(waiter.pid)
        granted_late = until(lambda r: r.get("MESSAGE_ID") == ids["Granted"] and
                             r.get("NVSHARE_PID") == w)
        if granted_late is None:
            failures.append(f"the waiter under --log-waits-after 1h was not granted: {records}")
        # One daemon, one socket: a record of the wait would have come first.
        logged = [r for r in records if r.get("MESSAGE_ID") == ids["Waiting"] and
                  r.get("NVSHARE_PID") == w and r.get("PRIORITY") == "6"]
        if logged:
            failures.append(f"a short wait was logged under --log-waits-after 1h: {logged}")

        for f in failures:
            print("FAIL:", f)
        print(f"{len(records)} records captured")
        return 1 if failures else 0
    finally:
        for p in clients + daemons:
            p.kill()
            p.wait()
        shutil.rmtree(tmp)


sys.exit(main())
