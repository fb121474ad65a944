#!/usr/bin/env python3
"""nvshared's groups include only the groups below them (daemon/README.md):
the groups are the README's list, from the bottom up, each file named in
`backquotes` in its item. Prints which group includes which (the include
graph between groups) and fails on a file of daemon/ in no group, an include
that goes up, or a cycle between headers."""
import os
import re
import sys


def groups(root):
    """[(name, {file stem, ...}), ...] from the README's list, bottom first."""
    daemon = os.path.join(root, "daemon")
    stems = {os.path.splitext(f)[0] for f in os.listdir(daemon) if f.endswith((".h", ".cpp"))}
    with open(os.path.join(daemon, "README.md"), encoding="utf-8") as f:
        text = f.read()
    items = re.findall(r"^- (.*?)(?=^- |^\S|\Z)", text, re.M | re.S)
    out = []
    for item in items:
        named = {os.path.splitext(n)[0] for n in re.findall(r"`([^`]+)`", item)}
        members = named & stems
        if members:
            label = re.split(r"[,:(]| ties", item)[0].strip().strip("`")
            out.append((label.removeprefix("The ").lower(), members))
    return out, stems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    order, stems = groups(root)
    group_of = {stem: i for i, (_, members) in enumerate(order) for stem in members}
    bad = [f"daemon/{s}: in no group of daemon/README.md" for s in sorted(stems - group_of.keys())]
    include = re.compile(r'#include "daemon/([^"]+)\.h"')
    edges, headers = {}, {}
    for name in sorted(os.listdir(os.path.join(root, "daemon"))):
        if not name.endswith((".cpp", ".h")):
            continue
        stem = os.path.splitext(name)[0]
        path = "daemon/" + name
        with open(os.path.join(root, path), encoding="utf-8") as f:
            targets = include.findall(f.read())
        if name.endswith(".h"):
            headers[stem] = targets
        for target in targets:
            src, dst = group_of.get(stem), group_of.get(target)
            if src is None or dst is None or src == dst:
                continue
            edges.setdefault(src, set()).add(dst)
            if dst > src:
                bad.append(f"{path} includes daemon/{target}.h "
                           f"({order[src][0]} may not include {order[dst][0]})")
    # Header cycles, within a group too: depth first, a header met again
    # while still open closes a cycle.
    state = {}

    def visit(h, stack):
        state[h] = "open"
        stack.append(h)
        for t in headers.get(h, ()):
            if state.get(t) == "open":
                loop = stack[stack.index(t):] + [t]
                bad.append("cycle: " + " -> ".join(f"daemon/{s}.h" for s in loop))
            elif t not in state:
                visit(t, stack)
        stack.pop()
        state[h] = "done"

    for h in sorted(headers):
        if h not in state:
            visit(h, [])
    for i, (name, _) in enumerate(order):
        print(f"{name:9} -> {', '.join(order[j][0] for j in sorted(edges.get(i, ()))) or '-'}")
    for line in bad:
        print("FAIL", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
