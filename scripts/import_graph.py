#!/usr/bin/env python3
"""The import graph of a crate's top-level modules, and its circles.

    python3 scripts/import_graph.py src [preload/src]

Reads every `use crate::…` and `crate::name::` path outside comments in each file under the
folder, maps it to the top-level module it names, and prints each arrow between two top-level
modules, then any circle. Exits 1 when there is a circle.
"""
import os
import re
import sys


def module_of(root: str, path: str) -> str:
    rel = os.path.relpath(path, root)
    top = rel.split(os.sep)[0]
    return top[:-3] if top.endswith(".rs") else top


def graph(root: str) -> dict:
    arrows = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(dirpath, f)
            m = module_of(root, p)
            if m in ("lib", "main"):
                continue
            code = "\n".join(l.split("//")[0] for l in open(p).read().split("\n"))
            names = set(re.findall(r"\bcrate::(\w+)", code))
            for grp in re.findall(r"\bcrate::\{([^}]*)\}", code):
                names.update(n.strip().split("::")[0] for n in grp.split(","))
            for n in names:
                if n and n != m and n != "self":
                    arrows.setdefault(m, set()).add(n)
    return arrows


def circles(arrows: dict) -> list:
    found = []
    def walk(node, stack):
        for nxt in sorted(arrows.get(node, ())):
            if nxt in stack:
                cyc = stack[stack.index(nxt):] + [nxt]
                key = tuple(sorted(cyc[:-1]))
                if key not in {tuple(sorted(c[:-1])) for c in found}:
                    found.append(cyc)
            elif len(stack) < 12:
                walk(nxt, stack + [nxt])
    for n in sorted(arrows):
        walk(n, [n])
    return found


def main() -> int:
    bad = False
    for root in sys.argv[1:] or ["src"]:
        arrows = graph(root)
        print(f"{root}:")
        for m in sorted(arrows):
            print(f"  {m} -> {', '.join(sorted(arrows[m]))}")
        for c in circles(arrows):
            print("  circle: " + " -> ".join(c))
            bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
