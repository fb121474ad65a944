#!/usr/bin/env python3
"""A podman container given nvshare.com/gpu=all is scheduled by the host's nvshared.

Issue 17, end to end with the real parts: the real nvshared on a socket
directory of the test's own, a CUDA program on the host (the preload test
client under libnvshare.so with the fake libcuda) holding GPU 0, `nvsharectl
cdi generate` pointed at that socket directory and the built libnvshare.so,
and a real podman running an image built here without a registry (`podman
import` of a root file system holding the test client, the fake libcuda.so.1
and the glibc they and libnvshare.so need, copied from the host). The
container gets nothing but the CDI device: its process loads libnvshare.so
through the /etc/ld.so.preload the spec mounts, registers with the host's
nvshared through the mounted socket directory, waits for the lock while the
host program holds it, shows up in `nvsharectl status` with its container's
cgroup (libpod-ID), and runs once the host program lets go. A second
container asks for the GPU by UUID (nvshare.com/gpu=UUID).

Podman runs in a private mount namespace with a tmpfs over /run, where the
spec is bind-mounted as /run/cdi (Debian 12's podman 4.3 reads specs only
from /etc/cdi and /var/run/cdi: the host's are never touched), with its
storage in the scratch directory (vfs driver), --cgroup-manager=cgroupfs (no
systemd as PID 1 needed), --network=none, and runc where installed (crun
refuses hosts with cgroup controllers on both hierarchies). Skipped (77),
with the reason, only where podman cannot run a container at all: not root,
podman missing, or the probe container failing to start.

With --old-root DIR (issue 45), the container's image is instead a Debian 11
root (glibc 2.31, made by `debootstrap --variant=minbase bullseye` into DIR
once and kept there): given the CDI device, /bin/sh and a Python start there
run cleanly with libnvshare.so preloaded (it asks no newer glibc than the
architecture's base version), and Python's ctypes reaches libc through the
library's dlsym. Skipped (77) where debootstrap is missing or cannot fetch
the packages.

Usage: podman_test.py [--old-root DIR] NVSHARED NVSHARECTL LIBNVSHARE FAKECUDA_DIR TEST_CLIENT
"""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

SKIP = 77
ARGS = sys.argv[1:]
OLD_ROOT = None
if ARGS[:1] == ["--old-root"]:
    OLD_ROOT, ARGS = os.path.abspath(ARGS[1]), ARGS[2:]
NVSHARED, NVSHARECTL, LIBNVSHARE, FAKECUDA_DIR, TEST_CLIENT = [
    os.path.abspath(a) for a in ARGS[:5]]
IMAGE = "localhost/nvshare-cdi-test:1"
OLD_IMAGE = "localhost/nvshare-cdi-test-bullseye:1"
DEADLINE_S = 60  # for each thing waited for; the test never sleeps a fixed time

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def wait_for(what, predicate):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"FAIL: timed out waiting for {what}")
        time.sleep(0.05)


def shared_objects(binary):
    """The files ld.so loads for `binary`, as ldd resolves them on the host."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    paths = []
    for line in out.splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m:
            paths.append(m.group(1))
    return paths


def build_root_tar(path):
    """A root file system: the test client, the fake libcuda and glibc, each
    at its host path (the client finds libcuda.so.1 through its RUNPATH)."""
    files = {TEST_CLIENT}
    for binary in (TEST_CLIENT, LIBNVSHARE):
        files.update(shared_objects(binary))
    with tarfile.open(path, "w") as tar:
        dirs = {"etc", "tmp", "run", "proc", "sys", "dev"}
        for f in files:
            parts = f.strip("/").split("/")[:-1]
            dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        for d in sorted(dirs):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        for f in sorted(files):
            with open(f, "rb") as src:  # symbolic links become the file they name
                data = src.read()
            info = tarfile.TarInfo(f.strip("/"))
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return sorted(files)

OLD_SUITE = "bullseye"
OLD_PACKAGES = "python3-minimal,libpython3.9-stdlib"


def old_root_tar(path):
    """The Debian 11 root as a tar file: debootstrapped into OLD_ROOT once
    (a marker file says it finished), then reused."""
    done = os.path.join(OLD_ROOT, ".nvshare-debootstrap-done")
    if not os.path.exists(done):
        if shutil.which("debootstrap") is None:
            skip("debootstrap is not installed (.ci/install-deps --tests installs it)")
        shutil.rmtree(OLD_ROOT, ignore_errors=True)
        r = subprocess.run(["debootstrap", "--variant=minbase", "--include=" + OLD_PACKAGES,
                            OLD_SUITE, OLD_ROOT, "http://deb.debian.org/debian"],
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            skip("debootstrap of Debian 11 failed here (no mirror reachable?): " +
                 (r.stderr.strip() or r.stdout.strip())[-400:])
        open(done, "w").close()
    with tarfile.open(path, "w") as tar:
        tar.add(OLD_ROOT, arcname=".", filter=lambda i: None if i.name.startswith("./proc/")
                or i.name == "./.nvshare-debootstrap-done" else i)


def old_image_checks(podman, tmp):
    r = podman.run("import", os.path.join(tmp, "old.tar"), OLD_IMAGE)
    check(r.returncode == 0, f"podman import of the Debian 11 root: {r.stderr.strip()}")
    libc = subprocess.run(["sh", "-c", "ls " + OLD_ROOT + "/lib/*/libc-*.so"],
                          capture_output=True, text=True).stdout.strip()
    print("Debian 11 root's libc:", libc)
    device = ["--device", "nvshare.com/gpu=all"]
    r = podman.run("run", *podman.run_options, *device, OLD_IMAGE, "/bin/sh", "-c",
                   "echo shell-ok; grep -c libnvshare /proc/self/maps")
    check(r.returncode == 0 and r.stdout.split()[:1] == ["shell-ok"] and r.stderr == "",
          f"/bin/sh runs cleanly in Debian 11: rc={r.returncode} {r.stdout!r} {r.stderr!r}")
    mapped = r.stdout.split()[1:2]
    check(mapped != [] and mapped[0] != "0",
          f"with libnvshare.so loaded (lines of it in /proc/self/maps: {mapped})")
    script = ("import ctypes, sys; "
              "print('python-ok', sys.version_info[:2], ctypes.CDLL('libc.so.6').getpid() > 0)")
    r = podman.run("run", *podman.run_options, *device, OLD_IMAGE, "python3", "-c", script)
    check(r.returncode == 0 and r.stdout.startswith("python-ok (3, 9) True") and r.stderr == "",
          f"python3 starts and ctypes finds libc through dlsym in Debian 11: "
          f"rc={r.returncode} {r.stdout!r} {r.stderr!r}")


class Podman:
    """podman in a private mount namespace, its storage under `tmp`."""

    def __init__(self, tmp, cdi_dir):
        self.cdi_dir = cdi_dir
        storage = os.path.join(tmp, "storage")
        self.base = ["podman", "--root", storage + "/root", "--runroot", storage + "/run",
                     "--tmpdir", storage + "/tmp", "--storage-driver", "vfs",
                     "--cgroup-manager", "cgroupfs", "--events-backend", "file"]
        runc = shutil.which("runc")
        if runc:
            self.base += ["--runtime", runc]
        # Lowering the limits needs no privilege; podman's defaults would
        # raise them, which a container host without CAP_SYS_RESOURCE refuses.
        self.run_options = ["--rm", "--network=none", "--ulimit", "nofile=1024:1024",
                            "--ulimit", "nproc=1024:1024"]

    def argv(self, *args):
        script = ('mount -t tmpfs -o mode=0755 tmpfs /run && mkdir /run/cdi && '
                  'mount --bind "$0" /run/cdi && exec "$@"')
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, self.cdi_dir,
                *self.base, *args]

    def run(self, *args, timeout=120):
        return subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=timeout)

    def start(self, *args):
        return subprocess.Popen(self.argv(*args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def generate_spec(sock, cdi_dir, tmp):
    spec = os.path.join(cdi_dir, "nvshare.json")
    r = subprocess.run([NVSHARECTL, "--socket", sock, "cdi", "generate", "--output", spec,
                        "--library", LIBNVSHARE, "--preload-file",
                        os.path.join(tmp, "container-ld.so.preload")],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"cdi generate: {r.stdout}{r.stderr}")
    return spec


def status(sock):
    r = subprocess.run([NVSHARECTL, "--socket", sock, "--json", "status"], capture_output=True,
                       text=True, timeout=30)
    return json.loads(r.stdout) if r.returncode == 0 else None


def client_where(sock, predicate):
    doc = status(sock)
    return next((c for c in doc["clients"] if predicate(c)), None) if doc else None


def main():
    if os.geteuid() != 0:
        skip("needs root: podman here runs rootful, in a private mount namespace")
    if shutil.which("podman") is None:
        skip("podman is not installed (.ci/install-deps --tests installs it)")
    if shutil.which("unshare") is None:
        skip("unshare (util-linux) is not installed")

    tmp = tempfile.mkdtemp(prefix="nvshare-podman-")
    procs = []
    try:
        sock_dir = os.path.join(tmp, "sock")
        os.makedirs(sock_dir)
        os.makedirs(os.path.join(tmp, "gpus"))
        cdi_dir = os.path.join(tmp, "cdi")
        os.makedirs(cdi_dir)
        # libnvshare.so looks for the socket under its default name, in the
        # directory the spec mounts at the default's place.
        help_text = subprocess.run([NVSHARECTL, "--help"], capture_output=True, text=True).stdout
        default_socket = re.search(r"lock socket \(default (\S+)\)", help_text).group(1)
        sock = os.path.join(sock_dir, os.path.basename(default_socket))

        podman = Podman(tmp, cdi_dir)
        if OLD_ROOT is not None:
            old_root_tar(os.path.join(tmp, "old.tar"))
        files = build_root_tar(os.path.join(tmp, "root.tar"))
        print("image files:", " ".join(files))
        r = podman.run("import", os.path.join(tmp, "root.tar"), IMAGE)
        if r.returncode != 0:
            skip(f"podman import failed here: {r.stderr.strip()}")
        loader = next(f for f in files if "/ld-linux" in f)
        r = podman.run("run", *podman.run_options, IMAGE, loader, "--version")
        if r.returncode != 0:
            skip(f"podman cannot run a container on this host: {r.stderr.strip()}")
        print("ok: podman runs a container here")

        env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LD_PRELOAD")}
        procs.append(subprocess.Popen(
            [NVSHARED, "--socket", sock, "--no-bus", "--anti-thrashing", "on",
             "--time-quantum", "24h", "--gpu-info-dir", os.path.join(tmp, "gpus"),
             "--state-dir", os.path.join(tmp, "state")], env=env, stderr=subprocess.DEVNULL))
        wait_for(sock, lambda: os.path.exists(sock))
        if OLD_ROOT is not None:
            generate_spec(sock, cdi_dir, tmp)
            old_image_checks(podman, tmp)
            return finish()

        # The host's CUDA program: holds GPU 0 until `release` exists (no
        # idle release: it keeps the lock between its rounds).
        release = os.path.join(tmp, "release")
        holder = subprocess.Popen(
            [TEST_CLIENT, "--kernels", "2", "--kernel-us", "10000", "--until", release],
            env={**env, "LD_PRELOAD": LIBNVSHARE, "LD_LIBRARY_PATH": FAKECUDA_DIR,
                 "NVSHARE_SOCKET": sock, "NVSHARE_IDLE_RELEASE_MS": "0"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(holder)
        wait_for("the host program to hold the GPU",
                 lambda: client_where(sock, lambda c: c["pid"] == holder.pid and
                                      c["state"] == "holding"))
        print("ok: the host program holds GPU 0")

        spec = generate_spec(sock, cdi_dir, tmp)
        uuid = status(sock)["gpus"][0]["uuid"]
        names = subprocess.run([NVSHARECTL, "cdi", "list", "--output", spec], capture_output=True,
                               text=True, timeout=30).stdout.split()
        check(names == ["nvshare.com/gpu=all", "nvshare.com/gpu=0", "nvshare.com/gpu=" + uuid],
              f"the spec offers all, 0 and the UUID: {names}")

        # The container: nothing but the CDI device and the program.
        container = podman.start("run", *podman.run_options, "--device", "nvshare.com/gpu=all",
                                 IMAGE, TEST_CLIENT, "--kernels", "2", "--kernel-us", "1000")
        procs.append(container)
        waiting = wait_for(
            "the container's process to wait in nvshared's status",
            lambda: container.poll() is not None or client_where(
                sock, lambda c: c["cgroup"].startswith("libpod-") and c["state"] == "waiting"))
        if waiting is True:
            out, err = container.communicate()
            raise SystemExit(f"FAIL: the container ended early ({container.returncode}):\n"
                             f"{out}{err}")
        print(f"ok: the container's process waits for the lock: {json.dumps(waiting)}")
        check(waiting["pid"] not in (holder.pid, 1) and waiting["comm"] == "nvshare-test-cl",
              "it is the container's test client, seen with its host pid")
        check(container.poll() is None and holder.poll() is None,
              "the container runs no GPU work while the host program holds the GPU")
        query = subprocess.run(
            [NVSHARECTL, "--socket", sock, "status", "--query=pid,cgroup,state",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout
        check(f"{waiting['pid']},{waiting['cgroup']},waiting\n" in query,
              f"nvsharectl status --query shows its container: {query!r}")

        open(release, "w").close()
        holder_out, holder_err = holder.communicate(timeout=DEADLINE_S)
        check(holder.returncode == 0 and "done=ok" in holder_out,
              f"the host program finished: {holder_out}{holder_err}")
        out, err = container.communicate(timeout=DEADLINE_S)
        check(container.returncode == 0 and "done=ok" in out,
              f"the container's process got the GPU and finished: {out}{err}")
        check("unscheduled" not in err, f"it ran scheduled, not failing open: {err!r}")

        # By UUID: registered with nvshared too (its grant counts in usage).
        before = sum(u["grants"] for u in status(sock)["usage"])
        r = podman.run("run", *podman.run_options, "--device", "nvshare.com/gpu=" + uuid, IMAGE,
                       TEST_CLIENT, "--kernels", "1", "--kernel-us", "1000")
        after = sum(u["grants"] for u in status(sock)["usage"])
        check(r.returncode == 0 and "done=ok" in r.stdout and after > before,
              f"a container given nvshare.com/gpu={uuid} is scheduled: {r.stdout}{r.stderr}")
        # And one without the device is not (the spec is what brings nvshare in).
        before = after
        r = podman.run("run", *podman.run_options, IMAGE, TEST_CLIENT, "--kernels", "1",
                       "--kernel-us", "1000")
        after = sum(u["grants"] for u in status(sock)["usage"])
        check(r.returncode == 0 and after == before,
              f"a container without the device never reaches nvshared: {r.stdout}{r.stderr}")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.kill()
                p.wait()
        if os.path.isdir(os.path.join(tmp, "storage")):
            Podman(tmp, os.path.join(tmp, "cdi")).run("rmi", "--all", "--force")
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


def finish():
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
