#!/usr/bin/env python3
"""`nvsharectl cdi generate` writes a spec valid under the CDI JSON Schema.

A real nvshared on a socket of the test's own, a real client registering two
GPUs, then `nvsharectl cdi generate` into a scratch directory: the spec must
validate against the official schema (tests/cdi/schema.json and defs.json,
see tests/cdi/README.md) with python3-jsonschema, name the devices all, 0, 1
and both UUIDs, be mode 0644, and `nvsharectl cdi list` must print the same
names. Without nvshared, the spec (from the driver's list) validates too.

Usage: schema_test.py NVSHARED NVSHARECTL TESTCLIENT SCHEMA_DIR
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "system"))
from checks import wait_path  # noqa: E402  (tests/system/checks.py)

SKIP = 77
NVSHARED, NVSHARECTL, TESTCLIENT, SCHEMA_DIR = sys.argv[1:5]

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(SKIP)

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def validator():
    with open(os.path.join(SCHEMA_DIR, "schema.json")) as f:
        schema = json.load(f)
    # schema.json refers to "defs.json#/…", relative to its own location.
    resolver = jsonschema.RefResolver(base_uri="file://" + os.path.abspath(SCHEMA_DIR) + "/",
                                      referrer=schema)
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, resolver=resolver)


def errors(v, spec):
    return [f"{list(e.absolute_path)}: {e.message}" for e in v.iter_errors(spec)]


def ctl(*args, check_rc=True):
    r = subprocess.run([NVSHARECTL, *args], capture_output=True, text=True, timeout=30)
    if check_rc and r.returncode != 0:
        raise SystemExit(f"FAIL: nvsharectl {' '.join(args)}: {r.returncode}\n{r.stderr}")
    return r


def main():
    v = validator()
    # The validator must be able to fail: a spec without devices is refused.
    check(errors(v, {"cdiVersion": "0.5.0", "kind": "nvshare.com/gpu"}) != [],
          "the schema refuses a spec without devices (the check is real)")
    check(errors(v, {"cdiVersion": "0.5.0", "kind": "nvshare.com/gpu",
                     "devices": [{"name": "all", "containerEdits": {
                         "mounts": [{"hostPath": "/x"}]}}]}) != [],
          "the schema refuses a mount without containerPath (defs.json is read)")

    tmp = tempfile.mkdtemp(prefix="nvshare-cdi-")
    sock = os.path.join(tmp, "run", "nvshare.sock")
    os.makedirs(os.path.join(tmp, "run"))
    os.makedirs(os.path.join(tmp, "gpus"))  # no driver GPUs: only what clients name
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID")}
    procs = []
    try:
        procs.append(subprocess.Popen(
            [NVSHARED, "--socket", sock, "--no-bus", "--gpu-info-dir", os.path.join(tmp, "gpus"),
             "--state-dir", os.path.join(tmp, "state")], env=env, stderr=subprocess.DEVNULL))
        wait_path(sock)
        client = subprocess.Popen([TESTCLIENT, "--socket", sock, "--gpu", "0", "--gpu", "1",
                                   "--cycles", "0"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        procs.append(client)
        for line in client.stdout:
            if " welcome" in line:
                break
        status = json.loads(ctl("--socket", sock, "socket-status").stdout)
        uuids = [g["uuid"] for g in status["gpus"]]
        check(len(uuids) == 2, f"nvshared knows the client's two GPUs: {uuids}")

        spec_path = os.path.join(tmp, "cdi", "nvshare.json")
        preload = os.path.join(tmp, "state", "container-ld.so.preload")
        library = os.path.join(tmp, "libnvshare.so")
        r = ctl("--socket", sock, "cdi", "generate", "--output", spec_path, "--library", library,
                "--preload-file", preload)
        check("GPUs from nvshared" in r.stdout, f"generate says where the GPUs came from: {r.stdout!r}")
        check("warning: " + library in r.stderr, "generate warns that the library is missing")
        with open(spec_path) as f:
            spec = json.load(f)
        problems = errors(v, spec)
        check(problems == [], f"the spec validates against the CDI schema {problems}")
        check(re.fullmatch(r"\d+\.\d+\.\d+", spec["cdiVersion"]) is not None and
              tuple(map(int, spec["cdiVersion"].split("."))) >= (0, 5, 0),
              f"cdiVersion {spec['cdiVersion']} is semver, 0.5.0 or later")
        check(spec["kind"] == "nvshare.com/gpu", "kind nvshare.com/gpu")
        names = [d["name"] for d in spec["devices"]]
        check(names == ["all", "0", "1"] + uuids, f"devices all, by index, by UUID: {names}")
        want = [{"hostPath": os.path.join(tmp, "run"), "containerPath": "/run/nvshare"},
                {"hostPath": library, "containerPath": library},
                {"hostPath": preload, "containerPath": "/etc/ld.so.preload"}]
        for d in spec["devices"]:
            mounts = d["containerEdits"]["mounts"]
            check([{k: m[k] for k in ("hostPath", "containerPath")} for m in mounts] == want and
                  all("ro" in m["options"] and "bind" in m["options"] for m in mounts),
                  f"device {d['name']}: socket directory, library, ld.so.preload, read-only")
            check("env" not in d["containerEdits"], f"device {d['name']}: no LD_PRELOAD")
        with open(preload) as f:
            check(f.read() == library + "\n", "the preload file names the library")
        for path in (spec_path, preload):
            check(stat.S_IMODE(os.stat(path).st_mode) == 0o644, f"{path} is mode 0644")
        leftovers = [n for n in os.listdir(os.path.dirname(spec_path)) if n != "nvshare.json"]
        check(leftovers == [], f"no temporary files left beside the spec: {leftovers}")

        listed = ctl("cdi", "list", "--output", spec_path).stdout.split()
        check(listed == ["nvshare.com/gpu=" + n for n in names], f"cdi list: {listed}")
        listed_json = json.loads(ctl("--json", "cdi", "list", "-o", spec_path).stdout)
        check(listed_json == listed, "cdi list --json")
        r = ctl("cdi", "list", "--output", os.path.join(tmp, "none.json"), check_rc=False)
        check(r.returncode == 5 and "cdi generate" in r.stderr, "cdi list without a spec: exit 5")

        # An unchanged spec is left as it is (nvshare-cdi.service runs often).
        before = os.stat(spec_path).st_ino
        ctl("--socket", sock, "cdi", "generate", "-q", "-o", spec_path, "--library", library,
            "--preload-file", preload)
        check(os.stat(spec_path).st_ino == before, "regenerating the same spec keeps the file")

        # Without nvshared: the driver's list (whatever this host has) and all.
        client.stdin.close()
        client.wait(timeout=20)
        procs[0].terminate()
        procs[0].wait(timeout=20)
        r = ctl("--socket", os.path.join(tmp, "none.sock"), "cdi", "generate", "-o", spec_path,
                "--library", library, "--preload-file", preload)
        check("GPUs from /proc/driver/nvidia/gpus" in r.stdout,
              f"without nvshared, the GPUs come from the driver: {r.stdout!r}")
        with open(spec_path) as f:
            spec = json.load(f)
        check(errors(v, spec) == [] and spec["devices"][0]["name"] == "all" and
              spec["devices"][0]["containerEdits"]["mounts"][0]["hostPath"] == tmp,
              "that spec validates too, with all, and the socket directory of --socket")
        r = ctl("cdi", "generate", "-o", spec_path, "--library", "relative.so", check_rc=False)
        check(r.returncode == 2, "a relative --library is a usage error")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
