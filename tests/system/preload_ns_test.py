#!/usr/bin/env python3
"""nvsharectl preload against the real /etc/ld.so.preload that glibc reads,
inside a private mount namespace with a tmpfs over /etc, so the host's /etc
is never touched. A test library (preload_marker.cpp) stands in for
libnvshare.so and announces itself on stderr in every process that loads it.

usage: preload_ns_test.py NVSHARECTL MARKER_LIBRARY LD_LIB_TOKEN INSTALL_SCRIPT [LIBNVSHARE]
(LD_LIB_TOKEN: what ld.so's $LIB expands to here, or '' if unknown;
INSTALL_SCRIPT: systemd/preload-merge-on-install.sh; LIBNVSHARE: the built
libnvshare.so, when there is one)
"""
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SKIP = 77
NVSHARECTL, MARKER, LIB_TOKEN, INSTALL_SCRIPT = sys.argv[1:5]
LIBNVSHARE = sys.argv[5] if len(sys.argv) > 5 else ""
PRELOAD = "/etc/ld.so.preload"
DROP_IN_DIR = "/etc/ld.so.preload.d"
DROP_IN = DROP_IN_DIR + "/nvshare.conf"
STATE = DROP_IN_DIR + "/.merged"
# What the namespace's /etc needs: the dynamic linker's cache and config,
# users for setpriv/su, and the alternatives symlinks some tools go through.
ETC_KEEP = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf",
            "alternatives", "pam.d", "pam.conf", "login.defs", "security"]


def enter_namespace():
    if os.environ.get("NVSHARE_TEST_IN_NAMESPACE") == "1":
        return
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        print("SKIP: needs root and unshare(1) for a private mount namespace")
        sys.exit(SKIP)
    env = dict(os.environ, NVSHARE_TEST_IN_NAMESPACE="1")
    os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable,
                           os.path.abspath(__file__)] + sys.argv[1:], env)


def private_etc():
    saved = tempfile.mkdtemp(prefix="nvshare-etc-")
    for name in ETC_KEEP:
        src = os.path.join("/etc", name)
        if os.path.lexists(src):
            if os.path.isdir(src) and not os.path.islink(src):
                shutil.copytree(src, os.path.join(saved, name), symlinks=True)
            else:
                shutil.copy2(src, os.path.join(saved, name), follow_symlinks=False)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "nvshare-test-etc", "/etc"],
                   check=True)
    for name in os.listdir(saved):
        src = os.path.join(saved, name)
        if os.path.isdir(src) and not os.path.islink(src):
            shutil.copytree(src, os.path.join("/etc", name), symlinks=True)
        else:
            shutil.copy2(src, os.path.join("/etc", name), follow_symlinks=False)
    shutil.rmtree(saved)


def ldso_reads():
    """The names ld.so reads from /etc/ld.so.preload, per nvsharectl's model of
    rtld.c (tested against the real ld.so in test_model_matches_ld_so)."""
    r = subprocess.run([NVSHARECTL, "--json", "preload", "status"], capture_output=True,
                       text=True, timeout=60, check=True)
    return json.loads(r.stdout)["listed"]


def select_timeout(seconds):
    """Waits without busy-looping (the condition is re-checked by the caller)."""
    import select
    select.select([], [], [], seconds)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


class PreloadTest(unittest.TestCase):
    def setUp(self):
        for path in (PRELOAD,):
            if os.path.lexists(path):
                os.unlink(path)
        shutil.rmtree(DROP_IN_DIR, ignore_errors=True)
        # Under the private /etc (root's, 0755): the merge lists no library
        # below a directory others can write, such as /tmp.
        self.tmp = tempfile.mkdtemp(prefix="nvshare-lib-", dir="/etc")
        os.chmod(self.tmp, 0o755)
        # The library under $LIB, so the entry exercises ld.so's expansion of
        # it, as /usr/$LIB/libnvshare.so does.
        if LIB_TOKEN:
            self.library = self.make_library("libmarker.so")
            self.entry = os.path.join(self.tmp, "$LIB", "libmarker.so")
        else:
            self.library = self.entry = self.make_library("libmarker.so")

    def tearDown(self):
        # Leave nothing preloaded for the next test's processes.
        if os.path.lexists(PRELOAD):
            os.unlink(PRELOAD)
        shutil.rmtree(DROP_IN_DIR, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def place(self, path):
        """The marker library at `path`, root's, 0755."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy(MARKER, path)
        return path

    def make_library(self, name):
        path = os.path.join(self.tmp, LIB_TOKEN, name) if LIB_TOKEN else os.path.join(self.tmp, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy(MARKER, path)
        return path

    def ctl(self, *args, entry=None, expect=0):
        env = dict(os.environ, NVSHARE_PRELOAD_ENTRY=entry or self.entry)
        env.pop("NVSHARE_TEST_PRELOAD_MARKER", None)
        r = subprocess.run([NVSHARECTL, *args], env=env, capture_output=True, encoding="utf-8", errors="replace",
                           timeout=60)
        if expect is not None:
            self.assertEqual(r.returncode, expect, f"nvsharectl {' '.join(args)}:\n{r.stdout}{r.stderr}")
        return r

    def probe(self, argv=("/bin/true",), prefix=()):
        """Runs a fresh process; returns (rc, stderr)."""
        env = dict(os.environ, NVSHARE_TEST_PRELOAD_MARKER="1")
        r = subprocess.run([*prefix, *argv], env=env, capture_output=True, encoding="utf-8", errors="replace", timeout=60)
        return r.returncode, r.stderr

    def assert_no_temporary_files(self):
        for d in ("/etc", DROP_IN_DIR):
            if os.path.isdir(d):
                left = [n for n in os.listdir(d) if n.startswith(".") and n != ".merged"]
                self.assertEqual(left, [], f"temporary files left in {d}")

    def ld_so_refuses(self, name, prefix=()):
        """Lists `name` by hand; True if the real ld.so then prints its error."""
        write(PRELOAD, name.encode() + b"\n")
        try:
            _, err = self.probe(prefix=prefix)
        finally:
            os.unlink(PRELOAD)
        return f"ERROR: ld.so: object '{name}' from /etc/ld.so.preload cannot be preloaded" in err

    def assert_left_out(self, name, reason):
        """With nvshare enabled, a drop-in listing `name` leaves it out with a
        warning naming it and `reason`; ld.so reads only nvshare's entry and
        every process starts without an error."""
        self.ctl("preload", "enable")
        write(os.path.join(DROP_IN_DIR, "50-other.conf"), name.encode() + b"\n")
        r = self.ctl("preload", "merge")
        self.assertIn(f"warning: {name}: ", r.stderr)
        self.assertIn(reason, r.stderr)
        self.assertIn("left out of /etc/ld.so.preload", r.stderr)
        self.assertEqual(ldso_reads(), [self.entry])
        self.assertEqual(self.probe(), (0, "preload-marker: loaded, euid 0\n"))

    # ---- the tests --------------------------------------------------------------

    def test_enable_lists_the_library_and_new_processes_load_it(self):
        rc, err = self.probe()
        self.assertEqual((rc, err), (0, ""))
        self.ctl("preload", "enable")
        st = os.stat(PRELOAD)
        self.assertEqual((st.st_mode & 0o7777, st.st_uid, st.st_gid), (0o644, 0, 0))
        self.assertEqual(read(PRELOAD), self.entry.encode() + b"\n")
        self.assertEqual(ldso_reads(), [self.entry])
        self.assertIn(self.entry, read(DROP_IN).decode())
        self.assertIn(self.entry, read(STATE).decode())
        if LIB_TOKEN:
            self.assertIn("$LIB", self.entry)
        rc, err = self.probe()
        self.assertEqual(rc, 0)
        self.assertEqual(err, "preload-marker: loaded, euid 0\n")
        self.assert_no_temporary_files()

    def test_foreign_lines_are_kept_byte_for_byte(self):
        foreign_lib = self.make_library("libforeign.so")
        # (One comment only: with a second one, rtld.c's quirk would already
        # read part of it as a name; see test_model_matches_ld_so.)
        foreign = b"# security agent, not nvshare's\n\n  " + foreign_lib.encode() + b"\t:"
        write(PRELOAD, foreign)
        self.assertEqual(ldso_reads(), [foreign_lib])
        self.ctl("preload", "enable")
        self.assertEqual(read(PRELOAD), foreign + b"\n" + self.entry.encode() + b"\n")
        self.assertEqual(ldso_reads(), [foreign_lib, self.entry])
        rc, err = self.probe()
        self.assertEqual(err.count("preload-marker: loaded"), 2, err)
        self.ctl("preload", "disable")
        self.assertEqual(read(PRELOAD), foreign + b"\n")
        self.assertFalse(os.path.exists(DROP_IN))
        rc, err = self.probe()
        self.assertEqual(err.count("preload-marker: loaded"), 1, err)

    def test_disable_removes_what_enable_added(self):
        self.ctl("preload", "enable")
        self.ctl("preload", "disable")
        self.assertFalse(os.path.lexists(PRELOAD))
        self.assertFalse(os.path.lexists(DROP_IN))
        self.assertFalse(os.path.lexists(STATE))
        self.assertEqual(self.probe(), (0, ""))
        r = self.ctl("preload", "disable")
        self.assertIn("up to date", r.stdout)

    def test_merge_is_idempotent(self):
        self.ctl("preload", "enable")
        before = os.stat(PRELOAD)
        data = read(PRELOAD)
        for _ in range(2):
            r = self.ctl("preload", "merge")
            self.assertIn("up to date", r.stdout)
        r = self.ctl("preload", "enable")
        self.assertIn("up to date", r.stdout)
        after = os.stat(PRELOAD)
        self.assertEqual((before.st_ino, before.st_mtime_ns), (after.st_ino, after.st_mtime_ns))
        self.assertEqual(read(PRELOAD), data)

    def test_any_package_can_drop_a_file(self):
        other = self.make_library("libother.so")
        self.ctl("preload", "enable")
        write(os.path.join(DROP_IN_DIR, "50-other.conf"), f"# another product\n{other}\n".encode())
        write(os.path.join(DROP_IN_DIR, "README"), b"/not/a/drop-in.so\n")
        self.ctl("preload", "merge")
        self.assertEqual(ldso_reads(), [other, self.entry])  # by file name
        rc, err = self.probe()
        self.assertEqual(err.count("preload-marker: loaded"), 2, err)
        # The package goes: its drop-in first, then its library. The merge
        # remembers the entry was its own (.merged) and takes it out.
        os.unlink(os.path.join(DROP_IN_DIR, "50-other.conf"))
        self.ctl("preload", "merge")
        os.unlink(other)
        self.assertEqual(ldso_reads(), [self.entry])
        self.assertEqual(self.probe(), (0, "preload-marker: loaded, euid 0\n"))

    def test_concurrent_merges_lose_nothing(self):
        foreign = b"# foreign\n"
        write(PRELOAD, foreign)
        libraries = [self.make_library(f"lib{i:02}.so") for i in range(12)]
        env = dict(os.environ, NVSHARE_PRELOAD_ENTRY=self.entry)
        os.makedirs(DROP_IN_DIR, exist_ok=True)
        procs = []
        for i, lib in enumerate(libraries):
            script = f'printf "%s\\n" "$1" > {DROP_IN_DIR}/{i:02}.conf && exec "$0" preload merge'
            procs.append(subprocess.Popen(["sh", "-c", script, NVSHARECTL, lib], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        procs.append(subprocess.Popen([NVSHARECTL, "preload", "enable"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for p in procs:
            _, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
        data = read(PRELOAD)
        self.assertTrue(data.startswith(foreign))
        self.assertEqual(sorted(ldso_reads()), sorted(libraries + [self.entry]))
        self.assert_no_temporary_files()
        # Concurrent removals too.
        procs = [subprocess.Popen(["sh", "-c", f'rm {DROP_IN_DIR}/{i:02}.conf && exec "$0" preload merge',
                                   NVSHARECTL], env=env, stdout=subprocess.DEVNULL)
                 for i in range(len(libraries))]
        for p in procs:
            self.assertEqual(p.wait(timeout=120), 0)
        self.assertEqual(ldso_reads(), [self.entry])

    def test_merge_waits_for_the_lock(self):
        """Another merge holding the drop-in directory's flock keeps this one
        from reading or writing anything until it lets go."""
        self.ctl("preload", "enable")
        other = self.make_library("libother.so")
        before = read(PRELOAD)
        fd = os.open(DROP_IN_DIR, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            write(os.path.join(DROP_IN_DIR, "50-other.conf"), other.encode() + b"\n")
            env = dict(os.environ, NVSHARE_PRELOAD_ENTRY=self.entry)
            merge = subprocess.Popen([NVSHARECTL, "preload", "merge"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            # The kernel lists a process blocked on a lock as "-> FLOCK ... <pid>".
            waiting = False
            for _ in range(3000):
                with open("/proc/locks") as locks:
                    waiting = any("->" in l and f" {merge.pid} " in l for l in locks)
                if waiting or merge.poll() is not None:
                    break
                select_timeout(0.01)
            self.assertTrue(waiting, "nvsharectl preload merge did not wait for the lock")
            self.assertIsNone(merge.poll())
            self.assertEqual(read(PRELOAD), before)
        finally:
            os.close(fd)  # releases the lock
        out, err = merge.communicate(timeout=60)
        self.assertEqual(merge.returncode, 0, err)
        self.assertEqual(ldso_reads(), [other, self.entry])

    def test_corrupt_preload_file_keeps_foreign_bytes(self):
        junk = (b"\xff\xfe not utf-8\r\n" + self.entry.encode() + b":\n:::\n\x01\x02\t" +
                b"/opt/keep/libkeep.so\t\n\tno newline at end")
        write(PRELOAD, junk)
        r = self.ctl("preload", "enable")
        self.assertEqual(read(PRELOAD), junk + b"\n" + self.entry.encode() + b"\n")
        self.ctl("preload", "disable")
        # The entry sharing its line with a ':' is blanked out (same length).
        blanked = junk.replace(self.entry.encode() + b":", b" " * len(self.entry) + b":")
        self.assertEqual(read(PRELOAD), blanked + b"\n")
        # A NUL byte hides everything after it from ld.so: said, not hidden.
        write(PRELOAD, b"/opt/x.so\n\x00junk\n")
        r = self.ctl("preload", "enable")
        self.assertIn("NUL byte", r.stderr)
        self.assertIn("ld.so will not read it", r.stderr)
        self.assertEqual(read(PRELOAD), b"/opt/x.so\n\x00junk\n" + self.entry.encode() + b"\n")

    def test_model_matches_ld_so(self):
        """nvsharectl's reading of the file (rtld.c's comment quirk included)
        is what the real ld.so reads: every name below is missing, so ld.so
        names each one in an error."""
        files = [b"# one\n/n/a\n# two\n# three\n",
                 b"# all of this\n/n/a # not /n/b\n/n/d\n",
                 b"# one\n#abcdefghij\n",
                 b"/n/a:/n/b\t/n/c  /n/d\n/n/e",
                 b"# a\n/n/x\n# b\n",
                 b"#\n#\n#\n/n/f1:/n/f2\n# long trailing comment ld.so never finds"]
        for data in files:
            write(PRELOAD, data)
            rc, err = self.probe()
            self.assertEqual(rc, 0)
            real = [line.split("'")[1] for line in err.splitlines()
                    if "from /etc/ld.so.preload cannot be preloaded" in line]
            self.assertEqual(ldso_reads(), real, data)
            self.assertNotEqual(real, [])

    def test_corrupt_drop_ins_are_ignored_with_warnings(self):
        os.makedirs(DROP_IN_DIR, exist_ok=True)
        write(os.path.join(DROP_IN_DIR, "10-binary.conf"), b"/x.so\x00\x01\x02")
        write(os.path.join(DROP_IN_DIR, "20-relative.conf"), b"libbare.so ../up.so\n")
        write(os.path.join(DROP_IN_DIR, "30-huge.conf"), b"/" * (65 * 1024))
        write(os.path.join(DROP_IN_DIR, "40-missing.conf"), b"/nonexistent/libgone.so\n")
        os.symlink("/dev/null", os.path.join(DROP_IN_DIR, "50-masked.conf"))
        self.ctl("preload", "enable")
        r = self.ctl("preload", "merge")
        self.assertIn("up to date", r.stdout)
        for needle in ("10-binary.conf: contains a NUL byte", "'libbare.so' is not an absolute",
                       "'../up.so' is not an absolute", "30-huge.conf: larger than 64 KiB",
                       "/nonexistent/libgone.so: no such file: /nonexistent", "50-masked.conf: not a regular"):
            self.assertIn(needle, r.stderr)
        self.assertEqual(ldso_reads(), [self.entry])

    def test_drop_ins_others_could_change_are_not_merged(self):
        """Issue 47: an entry goes into every program, root's included, so a
        drop-in that someone besides root can change is left out: owned by a
        user, linked to a file in a directory anyone may write (/tmp), or
        in a drop-in directory anyone may write."""
        self.ctl("preload", "enable")
        other = self.make_library("libother.so")
        users = os.path.join(DROP_IN_DIR, "60-users.conf")
        write(users, other.encode() + b"\n")
        os.chown(users, 65534, 65534)
        in_tmp = tempfile.NamedTemporaryFile(dir="/tmp", suffix=".conf", delete=False)
        in_tmp.write(other.encode() + b"\n")
        in_tmp.close()
        os.chmod(in_tmp.name, 0o644)
        os.symlink(in_tmp.name, os.path.join(DROP_IN_DIR, "70-linked.conf"))
        try:
            r = self.ctl("preload", "merge")
            self.assertIn(f"{users}: file {users} is owned by uid 65534, not root; ignored",
                          r.stderr)
            self.assertIn("70-linked.conf: directory /tmp is writable by group or others",
                          r.stderr)
            self.assertEqual(ldso_reads(), [self.entry])
            os.unlink(users)
            os.unlink(os.path.join(DROP_IN_DIR, "70-linked.conf"))
            # The directory itself: none of its drop-ins counts, nvshare's neither.
            os.chmod(DROP_IN_DIR, 0o777)
            r = self.ctl("preload", "merge")
            self.assertIn(f"{DROP_IN_DIR}: directory {DROP_IN_DIR} is writable by group or "
                          "others (mode 0777); none of its drop-ins is merged", r.stderr)
            self.assertEqual(ldso_reads(), [])
            os.chmod(DROP_IN_DIR, 0o755)
            self.ctl("preload", "merge")
            self.assertEqual(ldso_reads(), [self.entry])
        finally:
            os.unlink(in_tmp.name)

    def test_a_symlinked_preload_file_is_not_replaced(self):
        target = os.path.join(self.tmp, "elsewhere")
        write(target, b"# someone else's\n")
        os.symlink(target, PRELOAD)
        r = self.ctl("preload", "enable", expect=1)
        self.assertIn("symbolic link", r.stderr)
        self.assertTrue(os.path.islink(PRELOAD))
        self.assertEqual(read(target), b"# someone else's\n")

    def test_removed_library_only_warns_and_disable_repairs(self):
        self.ctl("preload", "enable")
        os.unlink(self.library)
        rc, err = self.probe()
        self.assertEqual(rc, 0)  # the program ran
        self.assertRegex(err, r"ERROR: ld\.so: object '[^']*libmarker\.so' from /etc/ld\.so\.preload "
                              r"cannot be preloaded .*: ignored\.")
        status = json.loads(self.ctl("--json", "preload", "status").stdout)
        self.assertEqual((status["active"], status["library_installed"]), (True, False))
        r = self.ctl("preload", "status")
        self.assertIn("run 'nvsharectl preload disable'", r.stderr)
        self.ctl("preload", "disable")
        self.assertEqual(self.probe(), (0, ""))

    def test_enable_refuses_a_missing_library(self):
        os.unlink(self.library)
        r = self.ctl("preload", "enable", expect=5)
        self.assertIn("not installed", r.stderr)
        self.assertFalse(os.path.lexists(DROP_IN))
        self.assertFalse(os.path.lexists(PRELOAD))

    def test_install_step_merges_only_for_a_real_install_under_usr(self):
        os.makedirs(DROP_IN_DIR)
        write(DROP_IN, self.entry.encode() + b"\n")

        def install_step(library, prefix, destdir=None):
            env = {k: v for k, v in os.environ.items() if k != "DESTDIR"}
            if destdir:
                env["DESTDIR"] = destdir
            r = subprocess.run(["sh", INSTALL_SCRIPT, NVSHARECTL, library, prefix], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout

        self.assertIn("DESTDIR is set", install_step(self.library, "/usr", destdir=self.tmp))
        self.assertIn("not /usr", install_step(self.library, "/usr/local"))
        self.assertIn("not installed", install_step(self.tmp + "/libnvshare.so", "/usr"))
        self.assertFalse(os.path.lexists(PRELOAD))
        self.assertIn("updated", install_step(self.library, "/usr"))
        self.assertEqual(read(PRELOAD), self.entry.encode() + b"\n")

    def test_the_real_libnvshare_is_loaded_quietly_everywhere(self):
        if not LIBNVSHARE:
            self.skipTest("libnvshare.so is not built here, or only with a sanitizer")
        # Installed the way meson installs it: under $LIB, named by the entry.
        real = self.make_library("libnvshare.so")
        shutil.copy(LIBNVSHARE, real)
        entry = os.path.join(self.tmp, "$LIB", "libnvshare.so") if LIB_TOKEN else real
        self.ctl("preload", "enable", entry=entry)
        self.assertEqual(ldso_reads(), [entry])
        # Every new process maps it, and it stays silent in programs that
        # never touch CUDA (it does nothing before the first CUDA call).
        r = subprocess.run(["cat", "/proc/self/maps"], capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertIn(real, r.stdout)
        for argv in (["/bin/true"], ["sh", "-c", "exit 0"], [sys.executable, "-c", "pass"]):
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            self.assertEqual((r.returncode, r.stderr), (0, ""), argv)
        self.ctl("preload", "disable", entry=entry)
        r = subprocess.run(["cat", "/proc/self/maps"], capture_output=True, text=True, timeout=60)
        self.assertNotIn("libnvshare.so", r.stdout)

    def test_status_reports_the_state(self):
        off = json.loads(self.ctl("--json", "preload", "status").stdout)
        self.assertEqual((off["active"], off["drop_in_present"], off["library_installed"]),
                         (False, False, True))
        self.assertEqual(off["library"], self.library)
        self.ctl("preload", "enable")
        on = json.loads(self.ctl("--json", "preload", "status").stdout)
        self.assertEqual((on["active"], on["drop_in_present"]), (True, True))
        text = self.ctl("preload", "status").stdout
        self.assertIn("Active:  yes", text)

    # ---- only what ld.so can load, and only root can change ------------------

    def ld_so_platform(self):
        """What ld.so expands $PLATFORM to (glibc 2.36 picks "haswell" on
        such Intel CPUs, unlike the kernel's AT_PLATFORM)."""
        r = subprocess.run(["/bin/true"], env=dict(os.environ, LD_SHOW_AUXV="1"),
                           capture_output=True, text=True, timeout=60)
        at_platform = [l.split()[-1] for l in r.stdout.splitlines() if l.startswith("AT_PLATFORM:")]
        # ld.so's own value: the directory it loads a $PLATFORM entry from.
        candidates = set(at_platform + ["haswell", "xeon_phi", "x86_64", "i686", "aarch64"])
        for name in candidates:
            self.place(os.path.join(self.tmp, "plat", name, "libmarker.so"))
        entry = os.path.join(self.tmp, "plat", "$PLATFORM", "libmarker.so")
        write(PRELOAD, entry.encode() + b"\n")
        try:
            r = subprocess.run(["cat", "/proc/self/maps"], capture_output=True, text=True,
                               timeout=60)
        finally:
            os.unlink(PRELOAD)
        mapped = [n for n in candidates if f"/plat/{n}/libmarker.so" in r.stdout]
        shutil.rmtree(os.path.join(self.tmp, "plat"))
        self.assertEqual(len(mapped), 1, r.stdout)
        return mapped[0], at_platform[0] if at_platform else ""

    def test_platform_is_expanded_as_ld_so_does(self):
        platform, at_platform = self.ld_so_platform()
        entry = os.path.join(self.tmp, "plat", "$PLATFORM", "libmarker.so")
        # Only where ld.so looks: listed, and loaded.
        self.place(os.path.join(self.tmp, "plat", platform, "libmarker.so"))
        self.ctl("preload", "enable")
        write(os.path.join(DROP_IN_DIR, "50-other.conf"), entry.encode() + b"\n")
        r = self.ctl("preload", "merge")
        self.assertNotIn("warning", r.stderr)
        self.assertEqual(ldso_reads(), [entry, self.entry])
        rc, err = self.probe()
        self.assertEqual(err, "preload-marker: loaded, euid 0\n" * 2)
        # Missing there: left out, where listing it makes ld.so complain.
        shutil.rmtree(os.path.join(self.tmp, "plat"))
        if at_platform and at_platform != platform:
            # The kernel's AT_PLATFORM directory is not where ld.so looks.
            self.place(os.path.join(self.tmp, "plat", at_platform, "libmarker.so"))
        r = self.ctl("preload", "merge")
        # The warning names the first directory that is missing: plat/ itself
        # where nothing was placed again (the CPU's AT_PLATFORM is ld.so's).
        missing = f"{self.tmp}/plat/{platform}" if at_platform and at_platform != platform \
            else f"{self.tmp}/plat"
        self.assertIn(f"warning: {entry}: no such file: {missing};", r.stderr)
        self.assertEqual(ldso_reads(), [self.entry])
        self.assertEqual(self.probe(), (0, "preload-marker: loaded, euid 0\n"))
        self.assertTrue(self.ld_so_refuses(entry))

    def test_a_file_that_is_not_an_elf_shared_object_is_left_out(self):
        text = self.make_library("libtext.so")
        write(text, b"INPUT(-lc)\n")  # a linker script, as libc.so is
        self.assert_left_out(text, "is not an ELF file")
        self.assertTrue(self.ld_so_refuses(text))
        os.unlink(os.path.join(DROP_IN_DIR, "50-other.conf"))
        # An executable (ET_EXEC) ld.so cannot preload either.
        shutil.copy("/bin/sh" if not os.path.islink("/bin/sh") else os.path.realpath("/bin/sh"),
                    text)
        with open(text, "rb") as f:
            elf_type = f.read(18)[16]
        if elf_type == 2:
            self.assert_left_out(text, "is an executable, not a shared object")
        else:  # a position-independent executable, ET_DYN as a library is
            self.assert_left_out(text, "is an executable (position-independent), not a "
                                 "shared object")
        self.assertTrue(self.ld_so_refuses(text))

    def elf_header(self, elf_class, machine, elf_type=3):
        """An ELF header alone (ld.so reads no further than what it rejects)."""
        import struct
        ident = b"\x7fELF" + bytes([elf_class, 1, 1, 0]) + bytes(8)
        if elf_class == 2:
            rest = struct.pack("<HHIQQQIHHHHHH", elf_type, machine, 1, 0, 64, 0, 0, 64, 56, 0,
                               64, 0, 0)
        else:
            rest = struct.pack("<HHIIIIIHHHHHH", elf_type, machine, 1, 0, 52, 0, 0, 52, 32, 0,
                               40, 0, 0)
        return ident + rest

    def test_wrong_elf_class_or_machine_is_left_out(self):
        if os.uname().machine != "x86_64":
            self.skipTest("the crafted headers assume an x86-64 host")
        lib32 = self.make_library("lib32.so")
        write(lib32, self.elf_header(1, 3))  # ELFCLASS32, EM_386
        self.assert_left_out(lib32, "is a 32-bit ELF object; programs here are 64-bit")
        self.assertTrue(self.ld_so_refuses(lib32))
        arm = self.make_library("libarm.so")
        write(arm, self.elf_header(2, 183))  # ELFCLASS64, EM_AARCH64
        write(os.path.join(DROP_IN_DIR, "50-other.conf"), arm.encode() + b"\n")
        r = self.ctl("preload", "merge")
        self.assertIn(f"warning: {arm}: {arm} is built for AArch64; programs here are x86-64",
                      r.stderr)
        self.assertEqual(ldso_reads(), [self.entry])
        self.assertTrue(self.ld_so_refuses(arm))

    def test_a_library_only_root_can_read_is_left_out(self):
        secret = self.make_library("libsecret.so")
        os.chmod(secret, 0o600)
        self.assert_left_out(secret, "is not readable by every user (mode 0600)")
        setpriv = shutil.which("setpriv")
        if setpriv:
            # Root's processes would load it; everyone else's would complain.
            self.assertTrue(self.ld_so_refuses(
                secret, prefix=(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")))

    def test_a_library_in_a_world_writable_directory_is_left_out(self):
        for mode in (0o777, 0o1777, 0o775):
            with self.subTest(mode=oct(mode)):
                shared = os.path.join(self.tmp, "shared")
                os.makedirs(shared, exist_ok=True)
                os.chmod(shared, mode)
                lib = os.path.join(shared, "libmarker.so")
                shutil.copy(MARKER, lib)
                self.assert_left_out(lib, f"directory {shared} is writable by group or others "
                                          f"(mode {mode:04o})")
        # Through a symbolic link too: the directory it leads into counts.
        link = os.path.join(self.tmp, "via-link")
        os.symlink(shared, link)
        self.assert_left_out(os.path.join(link, "libmarker.so"), f"directory {shared} is writable")

    def test_a_library_not_owned_by_root_is_left_out(self):
        lib = self.make_library("libnobody.so")
        os.chown(lib, 65534, 65534)
        self.assert_left_out(lib, f"file {lib} is owned by uid 65534, not root")
        os.chown(lib, 0, 0)
        owned = os.path.join(self.tmp, "nobodys")
        os.makedirs(owned)
        os.chown(owned, 65534, 65534)
        shutil.copy(MARKER, os.path.join(owned, "libx.so"))
        self.assert_left_out(os.path.join(owned, "libx.so"),
                             f"directory {owned} is owned by uid 65534, not root")

    def test_a_deleted_or_replaced_library_goes_on_the_next_merge(self):
        other = self.make_library("libother.so")
        self.ctl("preload", "enable")
        write(os.path.join(DROP_IN_DIR, "50-other.conf"), other.encode() + b"\n")
        self.ctl("preload", "merge")
        self.assertEqual(ldso_reads(), [other, self.entry])
        os.unlink(other)
        r = self.ctl("preload", "merge")
        self.assertIn(f"warning: {other}: no such file: {other}", r.stderr)
        self.assertEqual(ldso_reads(), [self.entry])
        self.assertEqual(self.probe(), (0, "preload-marker: loaded, euid 0\n"))
        # nvshare's own library replaced by something ld.so cannot load.
        write(self.library, b"garbage")
        r = self.ctl("preload", "merge")
        self.assertIn("is not an ELF file", r.stderr)
        self.assertFalse(os.path.lexists(PRELOAD))
        self.assertEqual(self.probe(), (0, ""))
        # Back in place: listed again by the next merge.
        shutil.copy(MARKER, self.library)
        self.ctl("preload", "merge")
        self.assertEqual(ldso_reads(), [self.entry])

    def test_enable_refuses_a_library_ld_so_must_not_load(self):
        os.chmod(self.library, 0o666)
        r = self.ctl("preload", "enable", expect=1)
        self.assertIn("writable by group or others (mode 0666); not enabling it", r.stderr)
        self.assertFalse(os.path.lexists(DROP_IN))
        self.assertFalse(os.path.lexists(PRELOAD))
        status = json.loads(self.ctl("--json", "preload", "status").stdout)
        self.assertIn("writable by group or others", status["library_problem"])

    def test_disable_unlists_the_library_from_a_shared_line(self):
        foreign = self.make_library("libforeign.so")
        # By hand, on shared lines, in two spellings (the entry and its path).
        lines = (f"{foreign} {self.entry}\n/opt/absent.so:{self.library}\t{foreign}\n").encode()
        write(PRELOAD, lines)
        self.ctl("preload", "enable")
        rc, err = self.probe()
        self.assertEqual(err.count("preload-marker: loaded"), 2, err)  # each library once
        self.ctl("preload", "disable")
        self.assertNotIn(self.entry, ldso_reads())
        self.assertEqual(ldso_reads(), [foreign, "/opt/absent.so", foreign])
        data = read(PRELOAD)
        self.assertEqual(len(data), len(lines))  # blanked, every other byte in place
        rc, err = self.probe()
        self.assertEqual(err.count("preload-marker: loaded"), 1, err)
        r = subprocess.run(["cat", "/proc/self/maps"], capture_output=True, text=True, timeout=60)
        self.assertNotIn(self.library, r.stdout)

    def test_disable_fails_loudly_while_a_drop_in_lists_the_library(self):
        self.ctl("preload", "enable")
        write(os.path.join(DROP_IN_DIR, "50-other.conf"), self.entry.encode() + b"\n")
        r = self.ctl("preload", "disable", expect=1)
        self.assertIn(f"still lists {self.entry}: a drop-in in {DROP_IN_DIR} lists it", r.stderr)
        self.assertEqual(ldso_reads(), [self.entry])

    def test_setuid_programs_load_the_entry(self):
        su = shutil.which("su")
        setpriv = shutil.which("setpriv")
        if su is None or setpriv is None or not os.stat(su).st_mode & 0o4000:
            self.skipTest("needs a setuid su(1) and setpriv(1)")
        self.ctl("preload", "enable")
        rc, err = self.probe((su, "--help"),
                             prefix=(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"))
        self.assertEqual(rc, 0, err)
        # Secure-execution mode: loaded, and running with the owner's euid.
        self.assertIn("preload-marker: loaded, euid 0\n", err)


if __name__ == "__main__":
    enter_namespace()
    private_etc()
    unittest.main(argv=[sys.argv[0], "-v"])
