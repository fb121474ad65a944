"""Soft checks for the system tests' scripts: each failure is printed and
counted, and finish() exits with the verdict after every check has run."""
import os
import sys
import time

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)
    return condition


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")
    sys.exit(0)


def wait_path(path, timeout=10):
    """Waits for a file (a socket a daemon creates) to appear; a hard failure if it never does."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"FAIL: {path} never appeared")
        time.sleep(0.02)
