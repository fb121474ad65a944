"""A Debian 12 container with systemd as PID 1, for pid1_test.py.

The root file system comes from debootstrap and is cached, read-only, under
/var/cache/nvshare-ci, keyed by its package list; each run boots an overlay
of it (in the caller's private mount namespace), so runs never see each
other's changes. systemd-nspawn boots it with its own cgroup2 tree; commands
run inside through nsenter. Everything is undone by stop(), which the test
calls from a finally block.
"""
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CACHE = "/var/cache/nvshare-ci"
SUITE = "bookworm"
# Bump when the recipe below changes what the cached root file system holds.
RECIPE = "1"
# Beyond what `quickstart service` installs: systemd as init, the system bus,
# useradd/runuser for the unprivileged user.
EXTRA_PACKAGES = ["systemd-sysv", "dbus", "passwd", "util-linux"]
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def log(message):
    print(f"pid1: {message}", flush=True)


def rootfs_packages(source_root):
    out = subprocess.run(["sh", os.path.join(source_root, ".ci/install-deps"), "--list"],
                         check=True, capture_output=True, text=True).stdout
    return sorted(set(out.split()) | set(EXTRA_PACKAGES))


def mirror():
    return os.environ.get("NVSHARE_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def cached_rootfs(source_root):
    """The cached root file system, built first if missing (minutes)."""
    packages = rootfs_packages(source_root)
    key = hashlib.sha256(" ".join([RECIPE, SUITE, mirror()] + packages).encode()).hexdigest()[:16]
    path = os.path.join(CACHE, f"pid1-rootfs-{key}")
    os.makedirs(CACHE, mode=0o755, exist_ok=True)
    with open(os.path.join(CACHE, "pid1.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time
        if os.path.isfile(os.path.join(path, ".complete")):
            log(f"root file system from the cache: {path}")
            return path
        for old in os.listdir(CACHE):  # other package lists: out of date
            if old.startswith("pid1-rootfs-"):
                shutil.rmtree(os.path.join(CACHE, old), ignore_errors=True)
        log(f"building the root file system with debootstrap ({mirror()}) into {path}")
        start = time.monotonic()
        work = path + ".tmp"
        result = subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=" + ",".join(packages), SUITE, work,
             mirror()], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200)
        if result.returncode != 0:
            sys.stdout.write(result.stdout[-4000:])
            shutil.rmtree(work, ignore_errors=True)
            raise RuntimeError(f"debootstrap failed (exit {result.returncode})")
        # minbase has no hosts file (sudo and others complain without one);
        # the packages are installed, their .debs are not needed again.
        with open(os.path.join(work, "etc/hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost\n")
        subprocess.run(["sh", "-c", f"rm -f {work}/var/cache/apt/archives/*.deb"], check=True)
        open(os.path.join(work, ".complete"), "w").close()
        os.rename(work, path)
        log(f"root file system built in {time.monotonic() - start:.0f} s")
        return path


def cgroup_roots():
    """(cgroup2 root, named systemd v1 root or None)."""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "/sys/fs/cgroup", None
    if os.path.exists("/sys/fs/cgroup/unified/cgroup.controllers"):
        named = "/sys/fs/cgroup/systemd"
        return "/sys/fs/cgroup/unified", named if os.path.isdir(named) else None
    return None, None


class Container:
    def __init__(self, lower, scratch_parent="/var/tmp"):
        self.lower = lower
        self.name = f"nvshare-pid1-{os.getpid()}"
        self.scratch = tempfile.mkdtemp(prefix="nvshare-pid1-", dir=scratch_parent)
        self.root = os.path.join(self.scratch, "merged")
        self.nspawn = None
        self.init_pid = None
        self.cgroups = []  # ours, outermost first
        self.console = os.path.join(self.scratch, "console.log")

    # -- set-up ------------------------------------------------------------
    def mount(self):
        """The overlay the container boots, and a private /run for nspawn
        (/run is no tmpfs on this host: nspawn could not clean it)."""
        upper, work = (os.path.join(self.scratch, d) for d in ("upper", "work"))
        for d in (upper, work, self.root):
            os.mkdir(d)
        subprocess.run(["mount", "-t", "overlay", "nvshare-pid1", "-o",
                        f"lowerdir={self.lower},upperdir={upper},workdir={work}", self.root],
                       check=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "nvshare-pid1-run", "/run"],
                       check=True)

    def boot(self, timeout=180):
        v2, named = cgroup_roots()
        for root in filter(None, (v2, named)):
            path = os.path.join(root, self.name)
            os.mkdir(path)
            self.cgroups.append(path)

        def into_cgroups():
            # nspawn creates supervisor/ and payload/ under its own cgroup:
            # give it one of its own, not the host's root.
            for path in self.cgroups:
                with open(os.path.join(path, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            os.setsid()

        # No tmpfs on the container's /tmp: the test may copy a checkout there
        # (pid1_test.py puts it at its own path).
        env = {"PATH": PATH, "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1",
               "SYSTEMD_NSPAWN_TMPFS_TMP": "0"}
        with open(self.console, "w") as console:
            self.nspawn = subprocess.Popen(
                ["systemd-nspawn", "--boot", f"--directory={self.root}", f"--machine={self.name}",
                 "--register=no", "--keep-unit", "--console=read-only", "--private-network"],
                stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, env=env,
                preexec_fn=into_cgroups)
        procs = os.path.join(self.cgroups[0], "payload/init.scope/cgroup.procs")
        deadline = time.monotonic() + timeout
        while self.init_pid is None:
            if self.nspawn.poll() is not None:
                raise RuntimeError(f"systemd-nspawn exited ({self.nspawn.returncode}):\n" +
                                   self.console_tail())
            if time.monotonic() > deadline:
                raise RuntimeError("the container's init did not start:\n" + self.console_tail())
            try:
                with open(procs) as f:
                    pids = f.read().split()
                self.init_pid = int(pids[0]) if pids else None
            except FileNotFoundError:
                pass
            if self.init_pid is None:
                time.sleep(0.2)
        # Until init has its private socket, systemctl cannot ask (and says
        # "offline" or nothing); after that --wait waits for the boot's end.
        state = ""
        while state in ("", "offline"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("systemd did not answer:\n" + self.console_tail())
            state = self.run(["systemctl", "is-system-running", "--wait"],
                             timeout=left).stdout.strip()
            if state in ("", "offline"):
                time.sleep(0.2)
        if state != "running":
            failed = self.run(["systemctl", "--failed", "--no-legend"]).stdout
            raise RuntimeError(f"the container's systemd is {state!r}; failed units:\n{failed}")

    def console_tail(self):
        with open(self.console, errors="replace") as f:
            return f.read()[-3000:]

    # -- use -----------------------------------------------------------------
    def run(self, argv, timeout=60, user=None, input=None):
        """argv inside the container (all its namespaces, its root), as root
        or as user; output captured as text. A timeout raises."""
        if user is not None:
            argv = ["runuser", "-u", user, "--"] + argv
        cmd = ["nsenter", f"--target={self.init_pid}", "--mount", "--uts", "--ipc", "--net",
               "--pid", "--cgroup", "--root", "--wd", "env", "-i", f"PATH={PATH}",
               "HOME=/root", "LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"] + argv
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)

    def path(self, inside):
        """Where a path inside the container is, seen from here."""
        return os.path.join(self.root, inside.lstrip("/"))

    # -- tear-down -----------------------------------------------------------
    def stop(self):
        if self.nspawn is not None and self.nspawn.poll() is None:
            # SIGTERM to nspawn asks the container's systemd to power off.
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(timeout=60)
            except subprocess.TimeoutExpired:
                log("the container did not stop in 60 s: killing it")
                self.nspawn.kill()
                self.nspawn.wait(timeout=30)
        for top in reversed(self.cgroups):
            self.kill_and_remove(top)
        for mount in (self.root, "/run"):
            subprocess.run(["umount", "-l", mount], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def kill_and_remove(self, top):
        """Kills what is left in a cgroup tree of ours and removes it,
        deepest first."""
        dirs = [d for d, _, _ in os.walk(top)]
        for _ in range(50):
            alive = False
            for d in dirs:
                try:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            alive = True
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except ProcessLookupError:
                                pass
                except FileNotFoundError:
                    pass
            if not alive:
                break
            time.sleep(0.1)
        for d in sorted(dirs, key=len, reverse=True):
            try:
                os.rmdir(d)
            except OSError as e:
                log(f"could not remove cgroup {d}: {e}")
