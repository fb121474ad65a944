#!/usr/bin/env python3
"""Installation tests: `meson install` into a scratch DESTDIR, then
  tree      the installed files, where they belong, and no system change
  verify    systemd-analyze verify of the installed units
  security  systemd-analyze security --offline, exposure <= 2.0
  socket    the installed nvshared, socket-activated by systemd-socket-activate
            on the installed nvshare.socket's ListenStream= path, with the
            installed nvshare.service's command line, in a private mount
            namespace with a tmpfs over /run (the host's /run is never touched)

usage: install_test.py CHECK  (paths come from the environment set by meson)
"""
import hashlib
import json
import os
import re
import select
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
E = os.environ
BUILD, SOURCE, MESON = E["NVSHARE_BUILD_ROOT"], E["NVSHARE_SOURCE_ROOT"], E["NVSHARE_MESON"].split()
PREFIX, BINDIR, SBINDIR = E["NVSHARE_PREFIX"], E["NVSHARE_BINDIR"], E["NVSHARE_SBINDIR"]
LIBDIR, SYSCONFDIR, DATADIR = E["NVSHARE_LIBDIR"], E["NVSHARE_SYSCONFDIR"], E["NVSHARE_DATADIR"]
MANDIR, UNITDIR, LOCALSTATEDIR = E["NVSHARE_MANDIR"], E["NVSHARE_UNITDIR"], E["NVSHARE_LOCALSTATEDIR"]
SOCKET_PATH, WITH_MAN = E["NVSHARE_SOCKET_PATH"], E["NVSHARE_WITH_MAN"] == "true"
UNITS = ["nvshare.socket", "nvshare.service", "nvshare-preload.path", "nvshare-preload.service",
         "nvshare-cdi.service",
         "nvshare-metrics.socket", "nvshare-metrics@.service"]
# The device plugin, its unit and page: only in builds that have it (-Ddevice_plugin).
DEVICE_PLUGIN = os.path.exists(os.path.join(BUILD, "deviceplugin", "nvshare-device-plugin"))
if DEVICE_PLUGIN:
    UNITS.append("nvshare-device-plugin.service")
ALIAS = "dbus-org.nvshare.Scheduler1.service"
MAN_PAGES = ["man1/nvsharectl.1", "man5/nvshare.conf.5", "man5/org.nvshare.Scheduler1.5",
             "man7/nvshare.7", "man7/nvshare-protocol.7", "man8/nvshared.8", "man8/libnvshare.8"]
if DEVICE_PLUGIN:
    MAN_PAGES.append("man8/nvshare-device-plugin.8")

from checks import check, finish  # beside this script


def install(destdir):
    r = subprocess.run(MESON + ["install", "-C", BUILD, "--no-rebuild", "--destdir", destdir],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        sys.exit(1)
    return r.stdout + r.stderr


def under(destdir, path):
    return os.path.join(destdir, path.lstrip("/"))


def unit_values(path, key):
    """Values of `key=` in a unit file (no continuation lines in ours)."""
    with open(path) as f:
        return [line.split("=", 1)[1].strip() for line in f
                if line.startswith(key + "=")]


def host_preload_state():
    """What the host's ld.so.preload setup looks like, to prove it unchanged."""
    state = []
    for p in ("/etc/ld.so.preload", "/etc/ld.so.preload.d"):
        if os.path.isdir(p):
            state.append((p, sorted(os.listdir(p))))
        elif os.path.exists(p):
            with open(p, "rb") as f:
                state.append((p, hashlib.sha256(f.read()).hexdigest()))
        else:
            state.append((p, None))
    return state


# ---- tree ----------------------------------------------------------------------------

def check_tree():
    before = host_preload_state()
    destdir = tempfile.mkdtemp(prefix="nvshare-destdir-")
    try:
        log = install(destdir)
        check("Skipping custom install script because DESTDIR is set" in log and
              "preload-merge-on-install.sh" in log,
              "the install-time merge did not say it skipped for DESTDIR:\n" + log)
        check(host_preload_state() == before, "the host's /etc/ld.so.preload(.d) changed")

        expected = {
            SBINDIR + "/nvshared": "exec", BINDIR + "/nvsharectl": "exec",
            SYSCONFDIR + "/ld.so.preload.d/nvshare.conf": "file",
        }
        expected.update({UNITDIR + "/" + u: "file" for u in UNITS})
        if DEVICE_PLUGIN:
            # sbindir: a daemon admins start, like nvshared (see its man page).
            expected[SBINDIR + "/nvshare-device-plugin"] = "exec"
        if WITH_MAN:
            expected.update({MANDIR + "/" + m: "file" for m in MAN_PAGES})
        if os.path.exists(os.path.join(BUILD, "preload", "libnvshare.so")):
            expected[LIBDIR + "/libnvshare.so"] = "file"
        for name, kind in [("org.nvshare.Scheduler1.conf", "system.d"),
                           ("org.nvshare.Scheduler1.service", "system-services")]:
            if os.path.exists(os.path.join(SOURCE, "dbus", name)) or \
                    os.path.exists(os.path.join(SOURCE, "dbus", name + ".in")):
                expected[f"{DATADIR}/dbus-1/{kind}/{name}"] = "file"
        expected[f"{DATADIR}/polkit-1/actions/org.nvshare.scheduler1.policy"] = "file"
        # Without bash-completion.pc, the path its completionsdir has under the prefix.
        expected[f"{DATADIR}/bash-completion/completions/nvsharectl"] = "file"
        expected[f"{DATADIR}/zsh/vendor-completions/_nvsharectl"] = "file"
        for path, kind in sorted(expected.items()):
            full = under(destdir, path)
            if check(os.path.isfile(full), f"{path} is not installed") and kind == "exec":
                check(os.access(full, os.X_OK), f"{path} is not executable")

        alias = under(destdir, UNITDIR + "/" + ALIAS)
        check(os.path.islink(alias) and os.readlink(alias) == "nvshare.service",
              f"{UNITDIR}/{ALIAS} is not a symlink to nvshare.service")
        activation = under(destdir, f"{DATADIR}/dbus-1/system-services/org.nvshare.Scheduler1.service")
        if os.path.exists(activation):
            check(unit_values(activation, "SystemdService") == [ALIAS],
                  f"the D-Bus activation file does not name {ALIAS}")

        # Everything lands under the prefix or the configured system dirs.
        roots = [PREFIX, SYSCONFDIR, LOCALSTATEDIR]
        for dirpath, dirnames, filenames in os.walk(destdir):
            for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                rel = "/" + os.path.relpath(os.path.join(dirpath, name), destdir)
                check(any(rel.startswith(r.rstrip("/") + "/") for r in roots),
                      f"{rel} is outside {roots}")

        # The units point at the installed programs and the configured socket.
        service = under(destdir, UNITDIR + "/nvshare.service")
        exec_start = shlex.split(unit_values(service, "ExecStart")[0])
        check(exec_start[0] == SBINDIR + "/nvshared", f"ExecStart= runs {exec_start[0]}")
        merge_service = under(destdir, UNITDIR + "/nvshare-preload.service")
        check(unit_values(merge_service, "ExecStart") == [BINDIR + "/nvsharectl preload merge"],
              "nvshare-preload.service does not run the installed nvsharectl")
        # The merge runs again when the installed library changes.
        path_unit = under(destdir, UNITDIR + "/nvshare-preload.path")
        check(unit_values(path_unit, "PathChanged") ==
              ["/etc/ld.so.preload.d", LIBDIR + "/libnvshare.so"],
              "nvshare-preload.path does not watch the drop-ins and the installed library")
        sock = under(destdir, UNITDIR + "/nvshare.socket")
        check(unit_values(sock, "ListenStream") == [SOCKET_PATH],
              f"nvshare.socket does not listen on {SOCKET_PATH}")
        check(unit_values(sock, "SocketMode") == ["0666"], "nvshare.socket is not 0666")
        check("Also=nvshare.socket nvshare-preload.path" in open(service).read(),
              "systemctl enable nvshare would not enable the socket and the path unit")
        if DEVICE_PLUGIN:
            plugin_unit = under(destdir, UNITDIR + "/nvshare-device-plugin.service")
            check(unit_values(plugin_unit, "ExecStart") == [SBINDIR + "/nvshare-device-plugin"],
                  "nvshare-device-plugin.service does not run the installed plugin")
    finally:
        shutil.rmtree(destdir)
    finish()


# ---- verify and security -------------------------------------------------------------

SEARCH_PATH = ["/etc/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
               "/lib/systemd/system"]


def verification_root():
    """The DESTDIR tree plus the host's targets, which the units depend on.
    Returns (root, unit directory inside it)."""
    root = tempfile.mkdtemp(prefix="nvshare-root-")
    install(root)
    unitdir = under(root, UNITDIR)
    if UNITDIR.rstrip("/") not in SEARCH_PATH:
        # -Dsystemdsystemunitdir outside systemd's search path (a packager's
        # staging choice): verify the same files from /etc/systemd/system.
        unitdir = under(root, "/etc/systemd/system")
        os.makedirs(unitdir, exist_ok=True)
        for name in UNITS + [ALIAS]:
            src = under(root, UNITDIR + "/" + name)
            if os.path.islink(src):
                os.symlink(os.readlink(src), os.path.join(unitdir, name))
            else:
                shutil.copy(src, unitdir)
    targets = os.path.join(root, "usr/lib/systemd/system")
    os.makedirs(targets, exist_ok=True)
    host_units = next((d for d in ("/lib/systemd/system", "/usr/lib/systemd/system")
                       if os.path.isdir(d)), None)
    if host_units is None:
        print("SKIP: no systemd unit directory on this host")
        sys.exit(SKIP)
    for name in os.listdir(host_units):
        if name.endswith(".target") and not os.path.exists(os.path.join(targets, name)):
            shutil.copy(os.path.join(host_units, name), targets, follow_symlinks=True)
    # What the units run that the package depends on rather than installs:
    # ExecReload='s /bin/kill (procps).
    for program in HOST_PROGRAMS:
        if not os.access(program, os.X_OK):
            print(f"SKIP: {program} is missing on this host (.ci/install-deps installs it)")
            sys.exit(SKIP)
        os.makedirs(os.path.dirname(under(root, program)), exist_ok=True)
        shutil.copy(program, under(root, program), follow_symlinks=True)
    return root, unitdir


HOST_PROGRAMS = ["/bin/kill"]


def check_verify():
    root, unitdir = verification_root()
    try:
        units = [os.path.join(unitdir, u) for u in UNITS + [ALIAS]]
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", "--root=" + root] + units,
                           capture_output=True, text=True, timeout=120)
        print(r.stdout + r.stderr)
        # verify exits 0 on unknown keys and bad values; any message is a finding.
        check(r.returncode == 0 and (r.stdout + r.stderr).strip() == "",
              "systemd-analyze verify reported problems")
        # It does check that the programs exist: without nvshared it must fail.
        os.unlink(under(root, SBINDIR + "/nvshared"))
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", "--root=" + root,
                            os.path.join(unitdir, "nvshare.service")],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode != 0 and "nvshared" in r.stderr,
              "verify did not notice a missing ExecStart= program")
    finally:
        shutil.rmtree(root)
    finish()


def check_security():
    root, unitdir = verification_root()
    try:
        for unit in ["nvshare.service", "nvshare-preload.service", "nvshare-cdi.service",
                     "nvshare-metrics@.service"] + \
                (["nvshare-device-plugin.service"] if DEVICE_PLUGIN else []):
            path = os.path.join(unitdir, unit)
            r = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--threshold=20",
                                "--root=" + root, path], capture_output=True, text=True,
                               timeout=120)
            m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout)
            print(f"{unit}: exposure {m.group(1) if m else '?'} (rc {r.returncode})")
            check(m is not None and float(m.group(1)) <= 2.0 and r.returncode == 0,
                  f"{unit}: exposure above 2.0\n{r.stdout}{r.stderr}")
    finally:
        shutil.rmtree(root)
    finish()


# ---- socket activation ---------------------------------------------------------------

def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        select.select([], [], [], 0.05)
    check(False, f"timed out waiting for {what}")
    return False


def check_socket():
    if os.environ.get("NVSHARE_TEST_IN_NAMESPACE") != "1":
        if os.geteuid() != 0 or not shutil.which("unshare") or \
                not shutil.which("systemd-socket-activate"):
            print("SKIP: needs root, unshare(1) and systemd-socket-activate(1)")
            sys.exit(SKIP)
        os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable,
                               os.path.abspath(__file__), "socket"],
                   dict(os.environ, NVSHARE_TEST_IN_NAMESPACE="1"))
    destdir = tempfile.mkdtemp(prefix="nvshare-destdir-")
    install(destdir)
    listen = unit_values(under(destdir, UNITDIR + "/nvshare.socket"), "ListenStream")[0]
    service = under(destdir, UNITDIR + "/nvshare.service")
    env_defaults = dict(v.split("=", 1) for v in unit_values(service, "Environment"))
    argv = shlex.split(unit_values(service, "ExecStart")[0])
    check(argv[0] == SBINDIR + "/nvshared", "ExecStart= is not the installed nvshared")
    nvshared, nvsharectl = under(destdir, argv[0]), under(destdir, BINDIR + "/nvsharectl")

    # The unit's own default for the idle exit must be one nvshared accepts.
    default_args = [re.sub(r"\$\{(\w+)\}", lambda m: env_defaults[m.group(1)], a) for a in argv[1:]]
    r = subprocess.run([nvshared] + default_args + ["--version"], capture_output=True, text=True)
    check(r.returncode == 0, f"nvshared rejects the unit's arguments {default_args}: {r.stderr}")

    top = "/" + listen.strip("/").split("/")[0]
    if top != "/run":
        print(f"SKIP: ListenStream={listen} is not under /run")
        sys.exit(SKIP)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "nvshare-test-run", "/run"],
                   check=True)
    os.makedirs(os.path.dirname(listen), mode=0o755, exist_ok=True)  # DirectoryMode=0755

    notify_path = "/run/nvshare-test-notify"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    # Like `systemctl edit nvshare` setting NVSHARE_IDLE_EXIT=1s, so the idle
    # exit is seen quickly; the watchdog at 1 s so pings come every 0.5 s.
    env = dict(env_defaults, NVSHARE_IDLE_EXIT="1s")
    args = [re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], a) for a in argv[1:]]
    script = ('exec systemd-socket-activate -l "$0" -E NOTIFY_SOCKET=' + notify_path +
              ' -E WATCHDOG_USEC=1000000 -E WATCHDOG_PID=$$ "$@"')
    daemon = subprocess.Popen(["sh", "-c", script, listen, nvshared] + args,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    messages = []

    def received(prefix):
        while select.select([notify], [], [], 0)[0]:
            messages.extend(notify.recv(4096).decode().split("\n"))
        return any(m.startswith(prefix) for m in messages)

    try:
        if wait_for(lambda: os.path.exists(listen), 30, f"{listen} to appear"):
            r = subprocess.run([nvsharectl, "--socket", listen, "socket-status"],
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"socket-status failed: {r.stderr}")
            if r.returncode == 0:
                status = json.loads(r.stdout)
                check(isinstance(status, dict), "the status is not a JSON object")
            wait_for(lambda: received("READY=1"), 30, "READY=1")
            wait_for(lambda: received("WATCHDOG=1"), 30, "WATCHDOG=1")
            # No client left: it exits by itself, status 0 (so Restart=on-failure
            # leaves it down until the socket is used again).
            if wait_for(lambda: daemon.poll() is not None, 60, "the idle exit"):
                check(daemon.returncode == 0, f"nvshared exited with {daemon.returncode}")
                received("")
                check(any(m.startswith("STOPPING=1") for m in messages), "no STOPPING=1")
    finally:
        if daemon.poll() is None:
            daemon.kill()
        out, _ = daemon.communicate(timeout=30)
        print(out)
        print("notifications:", [m for m in messages if m])
        shutil.rmtree(destdir)
    finish()


if __name__ == "__main__":
    {"tree": check_tree, "verify": check_verify, "security": check_security,
     "socket": check_socket}[sys.argv[1]]()
