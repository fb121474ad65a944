#!/usr/bin/env python3
"""libnvshare.so's groups include only the groups below them (preload/README.md):
driver/, the top level, memory/, swap/, lock/, hooks/, in that order. Prints
which group includes which (the include graph between groups) and fails on an
include that goes the wrong way."""
import os
import re
import sys

ORDER = ["driver", "top", "memory", "swap", "lock", "hooks"]


def group_of(path):
    parts = path.split("/")
    return parts[1] if len(parts) > 2 else "top"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    preload = os.path.join(root, "preload")
    edges, bad = {}, []
    include = re.compile(r'#include "(preload/[^"]+)"')
    for folder, _, files in os.walk(preload):
        for name in files:
            if not name.endswith((".cpp", ".h")):
                continue
            path = os.path.relpath(os.path.join(folder, name), root)
            src = group_of(path)
            with open(os.path.join(root, path), encoding="utf-8") as f:
                for target in include.findall(f.read()):
                    dst = group_of(target)
                    if dst == src:
                        continue
                    edges.setdefault(src, set()).add(dst)
                    if ORDER.index(dst) > ORDER.index(src):
                        bad.append(f"{path} includes {target} ({src}/ may not include {dst}/)")
    for src in ORDER:
        print(f"{src:7} -> {', '.join(sorted(edges.get(src, ()), key=ORDER.index)) or '-'}")
    for line in bad:
        print("FAIL", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
