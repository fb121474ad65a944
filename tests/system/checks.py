"""Soft checks for the system tests' scripts: each failure is printed and
counted, and finish() exits with the verdict after every check has run."""
import sys

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
