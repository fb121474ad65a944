#!/usr/bin/env python3
"""nvshare under a real systemd as PID 1, tested as an admin would.

Boots Debian 12 with systemd in a container (pid1_container.py), installs
nvshare there with the README's first command (.ci/quickstart service, on a
copy of this checkout at the same path), then runs named checks, one PASS or
FAIL line each. Where the checkout holds the build that command makes (CI ran
it just before), the copy takes it along and the command's ninja finds it up
to date: the container tests the install under systemd, not the compile once
more.
The host is not changed: the container's root is an overlay of a cached
read-only root file system, mounted in a private mount namespace, and the
container, its cgroups and its mounts are removed at the end, failed or not.

usage: pid1_test.py MARKER_LIBRARY
(MARKER_LIBRARY: the preload marker, a harmless library for the path-unit
check; environment: NVSHARE_SOURCE_ROOT, NVSHARE_CUDA_HEADERS)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pid1_container
from pid1_container import Container, log

SKIP = 77
MARKER = sys.argv[1]
SOURCE = os.environ["NVSHARE_SOURCE_ROOT"]
CUDA = os.environ.get("NVSHARE_CUDA_HEADERS", "/usr/local/cuda/include")
# quickstart's default, where the container gets CUDA's headers.
CUDA_INSIDE = "/usr/local/cuda/include"
# The options of quickstart service's build (.ci/quickstart): a build/ of
# this checkout made with them is what the command would make again.
SERVICE_BUILD = {"prefix": "/usr", "sysconfdir": "/etc", "localstatedir": "/var",
                 "buildtype": "release", "tests": False, "unity": "on",
                 "cuda-headers": CUDA_INSIDE}
UNIT = "nvshare.service"
BUS = ["busctl", "get-property", "org.nvshare.Scheduler1", "/org/nvshare/Scheduler1",
       "org.nvshare.Scheduler1.Manager"]
DROP_INS = "/etc/systemd/system/nvshare.service.d"
USER = "nvshare-user"
# Where the path-unit check puts the marker: root's file in a directory only
# root may write, as ld.so.preload entries should be.
MARKER_INSIDE = "/usr/lib/nvshare-pid1-test/libpreload-marker.so"
MARKER_DROP_IN = "/etc/ld.so.preload.d/zz-pid1-test.conf"
EXPOSURE_BOUND = 2.0


class Failed(Exception):
    pass


def preconditions():
    if os.geteuid() != 0:
        return "needs root (debootstrap, systemd-nspawn, mounts, cgroups)"
    for tool in ("debootstrap", "systemd-nspawn", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (.ci/install-deps --tests installs it)"
    if pid1_container.cgroup_roots()[0] is None:
        return "no cgroup2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified"
    return None


def enter_namespace():
    """Again in a private mount namespace: the overlay and the private /run
    vanish with this process, however it ends."""
    if os.environ.get("NVSHARE_TEST_IN_NAMESPACE") == "1":
        return
    env = dict(os.environ, NVSHARE_TEST_IN_NAMESPACE="1")
    os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable,
                           os.path.abspath(__file__)] + sys.argv[1:], env)


def wait_for(what, predicate, timeout):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {timeout} s")
        time.sleep(0.2)


class Admin:
    """What an admin types inside the container."""

    def __init__(self, container):
        self.c = container

    def run(self, argv, ok=True, timeout=60, user=None):
        r = self.c.run(argv, timeout=timeout, user=user)
        if ok and r.returncode != 0:
            raise Failed(f"{' '.join(argv)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def out(self, argv, **kw):
        return self.run(argv, **kw).stdout.strip()

    def prop(self, unit, name):
        return self.out(["systemctl", "show", "-p", name, "--value", unit])

    def state(self, unit):
        return self.run(["systemctl", "is-active", unit], ok=False).stdout.strip()

    def expect_state(self, unit, want, timeout=30):
        wait_for(f"{unit} {want} (it is {self.state(unit)})",
                 lambda: self.state(unit) == want, timeout)

    def write(self, path, text):
        self.run(["sh", "-c", 'mkdir -p "$(dirname "$1")" && printf %s "$2" > "$1"', "sh", path,
                  text])

    def remove(self, path):
        self.run(["rm", "-f", path])

    def reload(self):
        self.run(["systemctl", "daemon-reload"])

    def cursor(self):
        out = self.out(["journalctl", "-n", "0", "--show-cursor", "-q"])
        return out.split("cursor: ", 1)[1].strip()

    def invocation(self):
        return self.prop(UNIT, "InvocationID")


# -- the checks -----------------------------------------------------------
def check_enable_now(a):
    a.expect_state(UNIT, "active", timeout=5)
    for unit in ("nvshare.socket", "nvshare-preload.path"):
        enabled = a.run(["systemctl", "is-enabled", unit], ok=False).stdout.strip()
        if enabled != "enabled":
            raise Failed(f"{unit} is {enabled!r}, not enabled")
        a.expect_state(unit, "active", timeout=5)


def check_install_paths(a):
    """Debian's multiarch libdir, named through ld.so's $LIB in the entry."""
    multiarch = a.out(["gcc", "-print-multiarch"])
    a.run(["test", "-f", f"/usr/lib/{multiarch}/libnvshare.so"])
    lines = preload_lines(a)
    if "/usr/$LIB/libnvshare.so" not in lines:
        raise Failed(f"/etc/ld.so.preload lists {lines}, not /usr/$LIB/libnvshare.so")


def check_status_line(a):
    pattern = r"\d+ client\(s\), \d+ holding, \d+ waiting on \d+ GPU\(s\); mode (on|off|auto)"
    text = wait_for("a STATUS= line", lambda: re.fullmatch(pattern, a.prop(UNIT, "StatusText")),
                    10).group(0)
    shown = a.run(["systemctl", "status", "--no-pager", UNIT], ok=False).stdout
    if f'Status: "{text}"' not in shown:
        raise Failed(f"systemctl status does not show Status: \"{text}\":\n{shown}")
    log(f"status line: {text}")


def check_socket_activation(a):
    a.run(["systemctl", "stop", UNIT])
    a.expect_state(UNIT, "inactive")
    a.expect_state("nvshare.socket", "active", timeout=5)
    before = a.invocation()
    status = json.loads(a.out(["nvsharectl", "socket-status"]))
    if not isinstance(status, dict):
        raise Failed(f"socket-status printed {status!r}")
    a.expect_state(UNIT, "active", timeout=5)
    if a.invocation() == before:
        raise Failed("the service was not started again")


def check_bus_activation(a):
    a.run(["systemctl", "stop", UNIT])
    a.expect_state(UNIT, "inactive")
    before = a.invocation()
    version = a.out(BUS + ["Version"])
    if not re.fullmatch(r's "[^"]+"', version):
        raise Failed(f"Version read back as {version!r}")
    a.expect_state(UNIT, "active", timeout=5)
    if a.invocation() == before:
        raise Failed("D-Bus did not start the service")
    log(f"busctl started nvshared, Version {version}")


def check_set_tq(a):
    a.run(["nvsharectl", "set-tq", "123ms"])
    if a.out(BUS + ["TimeQuantumUSec"]) != "t 123000":
        raise Failed(f"TimeQuantumUSec is {a.out(BUS + ['TimeQuantumUSec'])!r}, not t 123000")
    a.run(["useradd", "--create-home", USER])
    r = a.run(["nvsharectl", "set-tq", "77ms"], ok=False, user=USER)
    if r.returncode == 0:
        raise Failed(f"{USER} changed the time quantum")
    if a.out(BUS + ["TimeQuantumUSec"]) != "t 123000":
        raise Failed(f"{USER}'s refused set-tq changed the quantum anyway")
    log(f"{USER}: exit {r.returncode}: {r.stderr.strip()}")


def check_idle_exit(a):
    a.write(f"{DROP_INS}/idle.conf", "[Service]\nEnvironment=NVSHARE_IDLE_EXIT=2s\n")
    try:
        a.reload()
        a.run(["systemctl", "restart", UNIT])  # returns once nvshared is ready (Type=notify)
        a.expect_state(UNIT, "inactive", timeout=30)  # idle for 2 s: exits
        if a.prop(UNIT, "Result") != "success":
            raise Failed(f"the idle exit left Result={a.prop(UNIT, 'Result')}")
        before = a.invocation()
        a.run(["nvsharectl", "socket-status"])  # answered: so it was started
        if a.invocation() == before:
            raise Failed("the connection did not start the service again")
        a.expect_state(UNIT, "inactive", timeout=30)  # and exits idle again
    finally:
        a.remove(f"{DROP_INS}/idle.conf")
        a.reload()
        a.run(["systemctl", "start", UNIT])
    a.expect_state(UNIT, "active", timeout=5)


def preload_lines(a):
    text = a.out(["cat", "/etc/ld.so.preload"], ok=False)
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def merged_once_more(a, since, want_marker):
    """Waits for the path unit's merge to run to its end (a run after
    `since`, an InvocationID); returns /etc/ld.so.preload."""
    unit = "nvshare-preload.service"
    wait_for(f"the path unit starting {unit}",
             lambda: a.prop(unit, "InvocationID") != since and
             a.state(unit) not in ("activating", "deactivating"), 30)
    result, status = a.prop(unit, "Result"), a.prop(unit, "ExecMainStatus")
    if result != "success" or status != "0" or a.state(unit) == "failed":
        shown = a.run(["systemctl", "status", "--no-pager", "-n", "5", unit], ok=False).stdout
        raise Failed(f"{unit}: Result={result}, status {status}:\n{shown}")
    # A drop-in change the first run missed starts another: wait for it too.
    wait_for(f"/etc/ld.so.preload {'listing' if want_marker else 'without'} the marker",
             lambda: (MARKER_INSIDE in preload_lines(a)) == want_marker, 10)
    return preload_lines(a)


def check_preload_path_merge(a):
    ours = [line for line in a.out(["cat", "/etc/ld.so.preload.d/nvshare.conf"]).splitlines()
            if line and not line.startswith("#")]
    unit = "nvshare-preload.service"
    before = a.prop(unit, "InvocationID")
    a.write(MARKER_DROP_IN, MARKER_INSIDE + "\n")
    lines = merged_once_more(a, before, True)
    if not all(entry in lines for entry in ours):
        raise Failed(f"/etc/ld.so.preload lost nvshare's entry {ours}: {lines}")
    # glibc really loads it now: the marker speaks when asked to.
    r = a.run(["env", "NVSHARE_TEST_PRELOAD_MARKER=1", "true"])
    if "preload-marker: loaded" not in r.stderr:
        raise Failed(f"a new process did not load the marker: {r.stderr!r}")
    log(f"/etc/ld.so.preload with a second drop-in: {lines}")
    before = a.prop(unit, "InvocationID")
    a.remove(MARKER_DROP_IN)
    lines = merged_once_more(a, before, False)
    if lines != ours:
        raise Failed(f"after removing the drop-in /etc/ld.so.preload is {lines}, not {ours}")


def check_option_error(a):
    cursor = a.cursor()
    a.write(f"{DROP_INS}/bogus.conf", "[Service]\nEnvironment=NVSHARE_IDLE_EXIT=bogus\n")
    try:
        a.reload()
        if a.run(["systemctl", "restart", UNIT], ok=False).returncode == 0:
            raise Failed("nvshare started with NVSHARE_IDLE_EXIT=bogus")
        want = "invalid idle exit time: 'bogus'"
        journal = ["journalctl", "-u", UNIT, "-o", "cat", f"--after-cursor={cursor}"]
        try:
            wait_for(f"{want!r} in journalctl -u nvshare -p err",
                     lambda: want in a.out(journal + ["-p", "err"]), 10)
        except Failed as e:
            raise Failed(f"{e}; at any priority:\n{a.out(journal + ['-n', '5'])}") from None
    finally:
        # Back to the installed unit, running, whatever happened above.
        a.remove(f"{DROP_INS}/bogus.conf")
        a.reload()
        a.run(["systemctl", "reset-failed", UNIT], ok=False)
        a.run(["systemctl", "restart", UNIT])
    a.expect_state(UNIT, "active", timeout=5)
    a.expect_state("nvshare.socket", "active", timeout=5)


def check_journal_priorities(a):
    """Lines the earlier checks made nvshared log, each at its priority
    (the sd-daemon prefix parsed by journald, never left in the text)."""
    want = {"using the socket passed by systemd": 6, "on the system bus as": 6,
            "time quantum set to 123ms": 5, "refused uid": 5, "no clients for 2 s": 6,
            "invalid idle exit time": 3}
    seen = {}
    for line in a.out(["journalctl", "-u", UNIT, "-o", "json"]).splitlines():
        entry = json.loads(line)
        if entry.get("SYSLOG_IDENTIFIER") != "nvshared":
            continue
        message = entry.get("MESSAGE")
        if not isinstance(message, str):
            message = bytes(message or []).decode(errors="replace")
        if re.match(r"<\d>", message):
            raise Failed(f"a priority prefix was left in the text: {message!r}")
        for start, priority in want.items():
            if message.startswith(start):
                seen.setdefault(start, set()).add(int(entry["PRIORITY"]))
    wrong = {m: (p, sorted(seen.get(m, ()))) for m, p in want.items() if seen.get(m) != {p}}
    if wrong:
        raise Failed("line: (wanted priority, seen): " + repr(wrong))


def check_security(a):
    a.expect_state(UNIT, "active", timeout=5)
    out = a.out(["systemd-analyze", "security", "--no-pager", UNIT])
    m = re.search(r"Overall exposure level for nvshare\.service: (\d+\.\d+)", out)
    if m is None:
        raise Failed(f"no exposure level in:\n{out[-2000:]}")
    score = float(m.group(1))
    log(f"systemd-analyze security nvshare.service: {score}")
    if score > EXPOSURE_BOUND:
        raise Failed(f"exposure {score} is above {EXPOSURE_BOUND}")


def check_reload(a):
    """systemctl reload nvshare, then kill -HUP: nvshared reads nvshare.conf
    again, in the same process, and says so in the journal."""
    a.run(["systemctl", "start", UNIT])
    pid = a.prop(UNIT, "MainPID")
    conf = "/etc/nvshare/nvshare.conf"
    a.write(conf, "anti-thrashing = on\n")
    try:
        a.run(["systemctl", "reload", UNIT])
        wait_for("AntiThrashing on after the reload",
                 lambda: a.out(BUS + ["AntiThrashing"]) == 's "on"', 10)
        if a.prop(UNIT, "MainPID") != pid:
            raise Failed(f"the reload replaced nvshared (pid {pid} -> {a.prop(UNIT, 'MainPID')})")
        journal = a.out(["journalctl", "-u", UNIT, "-o", "cat", "--no-pager"])
        if f"reloaded {conf}" not in journal:
            raise Failed(f"no 'reloaded {conf}' in the journal:\n{journal[-1500:]}")
        # kill -HUP, as an admin without systemctl would: the same.
        a.write(conf, "anti-thrashing = off\n")
        a.run(["kill", "-HUP", pid])
        wait_for("AntiThrashing off after kill -HUP",
                 lambda: a.out(BUS + ["AntiThrashing"]) == 's "off"', 10)
        if a.prop(UNIT, "MainPID") != pid:
            raise Failed(f"kill -HUP replaced nvshared (pid {pid} -> {a.prop(UNIT, 'MainPID')})")
    finally:
        a.remove(conf)
        a.run(["systemctl", "reload", UNIT], ok=False)


SCRAPES = r"""
import concurrent.futures, socket, sys
def scrape(_):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return b"\nnvshare_up 1\n" in data
with concurrent.futures.ThreadPoolExecutor(12) as pool:
    print(sum(pool.map(scrape, range(48))))
"""


def check_metrics_scrapes(a):
    """48 scrapes, 12 at a time, through nvshare-metrics.socket: every one
    sees nvshared, the instances sharing its answer in their runtime
    directory as one dynamic user."""
    a.run(["systemctl", "enable", "--now", "nvshare-metrics.socket"])
    listen = a.prop("nvshare-metrics.socket", "Listen")  # "127.0.0.1:9445 (Stream)"
    port = re.search(r":(\d+) ", listen).group(1)
    up = a.out(["python3", "-c", SCRAPES, port], timeout=120)
    if up != "48":
        raise Failed(f"{up} of 48 scrapes saw nvshared")
    a.run(["test", "-f", "/run/nvshare-metrics/status.json"])
    log("48 of 48 scrapes saw nvshared; /run/nvshare-metrics/status.json kept")


def check_uninstall(a):
    """The README's uninstall command (the last check): nothing of nvshare
    runs, is listed or is left installed, and programs start without a word
    from ld.so."""
    r = a.run(["sh", "-c", 'cd "$1" && sh .ci/quickstart uninstall 2>&1', "sh", SOURCE],
              timeout=120)
    if "nvshare: uninstalled" not in r.stdout:
        raise Failed(f"quickstart uninstall said:\n{r.stdout}")
    listed = [line for line in preload_lines(a) if "libnvshare" in line]
    if listed:
        raise Failed(f"/etc/ld.so.preload still lists {listed}")
    for prog in (["/bin/true"], ["sh", "-c", ":"], ["ls", "/"]):
        err = a.run(prog).stderr
        if err:
            raise Failed(f"{' '.join(prog)} printed {err!r}")
    for unit in (UNIT, "nvshare.socket", "nvshare-preload.path"):
        if a.state(unit) == "active":
            raise Failed(f"{unit} is still active")
    multiarch = a.out(["gcc", "-print-multiarch"])
    for path in ("/usr/bin/nvsharectl", "/usr/sbin/nvshared", f"/usr/lib/{multiarch}/libnvshare.so",
                 "/usr/lib/systemd/system/nvshare.service", "/etc/ld.so.preload.d/nvshare.conf"):
        if a.run(["test", "-e", path], ok=False).returncode == 0:
            raise Failed(f"{path} is left")


CHECKS = [
    ("enable-now", check_enable_now),
    ("install-paths", check_install_paths),
    ("status-line", check_status_line),
    ("socket-activation", check_socket_activation),
    ("bus-activation", check_bus_activation),
    ("set-tq", check_set_tq),
    ("idle-exit", check_idle_exit),
    ("preload-path-merge", check_preload_path_merge),
    ("option-error", check_option_error),
    ("journal-priorities", check_journal_priorities),
    ("security", check_security),
    ("reload", check_reload),
    ("metrics-scrapes", check_metrics_scrapes),
    ("uninstall", check_uninstall),  # last: it takes nvshare away
]


# -- set-up ---------------------------------------------------------------
def service_build():
    """build/ if quickstart service made it here with the same headers the
    container gets, else None (the container then builds its own)."""
    build = os.path.join(SOURCE, "build")
    if os.path.realpath(CUDA) != os.path.realpath(CUDA_INSIDE):
        return None
    info = os.path.join(build, "meson-info")
    try:
        with open(os.path.join(info, "meson-info.json")) as f:
            source = json.load(f)["directories"]["source"]
        with open(os.path.join(info, "intro-buildoptions.json")) as f:
            options = {o["name"]: o["value"] for o in json.load(f)}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if source != SOURCE or not os.path.isfile(os.path.join(build, "build.ninja")):
        return None
    return build if all(options.get(k) == v for k, v in SERVICE_BUILD.items()) else None


def copy_checkout(dest):
    """The checkout's files (tracked and new, not ignored) into the
    container at dest, with service_build() if there is one (the build's
    paths are absolute: dest is the checkout's own path)."""
    names = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], check=True, capture_output=True).stdout
    names = [n for n in names.split(b"\0") if n and os.path.lexists(os.path.join(SOURCE.encode(),
                                                                               n))]
    build = service_build()
    if build is not None:
        names.append(b"build")
        log("the checkout's build/ (quickstart service's) goes along")
    os.makedirs(dest, exist_ok=True)
    pack = subprocess.Popen(["tar", "-C", SOURCE, "--null", "-T", "-", "-cf", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    unpack = subprocess.Popen(["tar", "-C", dest, "-xf", "-"], stdin=pack.stdout)
    pack.stdout.close()
    pack.stdin.write(b"\0".join(names) + b"\0")
    pack.stdin.close()
    if pack.wait(timeout=120) != 0 or unpack.wait(timeout=120) != 0:
        raise RuntimeError("copying the checkout failed")


def prepare(c):
    """After boot: the boot's systemd-tmpfiles empties /tmp, where the
    checkout may be."""
    copy_checkout(c.path(SOURCE))
    shutil.copytree(CUDA, c.path(CUDA_INSIDE), symlinks=True)
    os.makedirs(os.path.dirname(c.path(MARKER_INSIDE)), mode=0o755)
    shutil.copyfile(MARKER, c.path(MARKER_INSIDE))
    os.chmod(c.path(MARKER_INSIDE), 0o644)


def main():
    reason = preconditions()
    if reason:
        print(f"SKIP: {reason}")
        return SKIP
    enter_namespace()
    # meson's timeout sends SIGTERM: unwind, so the finally below runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("pid1: terminated"))
    begin = time.monotonic()
    c = None
    results = []
    try:
        lower = pid1_container.cached_rootfs(SOURCE)
        log(f"root file system ready after {time.monotonic() - begin:.0f} s")
        c = Container(lower)
        c.mount()
        t = time.monotonic()
        c.boot()
        log(f"systemd running in the container after {time.monotonic() - t:.1f} s")
        prepare(c)
        t = time.monotonic()
        r = c.run(["sh", "-c", 'cd "$1" && nice sh .ci/quickstart service 2>&1', "sh", SOURCE],
                  timeout=900)
        print(r.stdout[-3000:], end="")
        log(f".ci/quickstart service: exit {r.returncode} after {time.monotonic() - t:.0f} s")
        if r.returncode != 0:
            print("FAIL quickstart-service: the README's first command failed")
            return 1
        admin = Admin(c)
        for name, check in CHECKS:
            t = time.monotonic()
            try:
                check(admin)
                results.append((name, True))
                print(f"PASS {name} ({time.monotonic() - t:.1f} s)", flush=True)
            except (Failed, subprocess.TimeoutExpired) as e:
                results.append((name, False))
                print(f"FAIL {name}: {e}", flush=True)
    finally:
        if c is not None:
            c.stop()
        log(f"done after {time.monotonic() - begin:.0f} s")
    failed = [name for name, ok in results if not ok]
    print(f"{len(results) - len(failed)} of {len(CHECKS)} checks passed" +
          (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed or len(results) != len(CHECKS) else 0


if __name__ == "__main__":
    sys.exit(main())
