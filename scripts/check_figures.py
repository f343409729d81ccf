#!/usr/bin/env python3
"""Every number the README's "Benchmarks in short" quotes must stand in BENCHMARKS.md, in the
section of the command the README names for it.

The summary is a list of bullets, each naming the script its figures come from
(`bash scripts/matrix.sh`). A figure is a number token of a bullet (`0.72`, `1,038`, `61`;
a range `a–b` is two; `1.08x`, `7 %` count by their digits); it must appear as a number in a
section of BENCHMARKS.md (a `## ` heading down to the next) that names one of the bullet's
scripts, or anywhere in BENCHMARKS.md for a bullet that names none. Trailing zeros may be
dropped in prose (0.50 in a table, 0.5 in a sentence). Exits 1 and lists what it could not
find.
  python3 scripts/check_figures.py [README.md] [BENCHMARKS.md]
"""
import re
import sys

# Not part of a longer number or word; a trailing x (1.08x) is a multiplier, not a letter.
NUMBER = re.compile(r"(?<![\w.,])\d+(?:,\d{3})*(?:\.\d+)?(?![0-9A-Za-wyz_]|[.,]\d)")
SCRIPT = re.compile(r"scripts/[\w.]+\.(?:sh|py)")


def figures(text):
    found = set(NUMBER.findall(text))
    return found | {n.rstrip("0").rstrip(".") for n in found if "." in n}


def main():
    readme_path = sys.argv[1] if len(sys.argv) > 1 else "README.md"
    bench_path = sys.argv[2] if len(sys.argv) > 2 else "BENCHMARKS.md"
    readme = open(readme_path, encoding="utf-8").read()
    bench = open(bench_path, encoding="utf-8").read()
    start = readme.index("## Benchmarks in short")
    end = readme.find("\n## ", start + 1)
    summary = readme[start:end if end != -1 else len(readme)]
    bullets = re.split(r"\n(?=\* )", summary)[1:]
    sections = re.split(r"\n(?=## )", bench)
    everywhere = figures(bench)
    missing = []
    for bullet in bullets:
        scripts = set(SCRIPT.findall(bullet))
        pool = set().union(*(figures(s) for s in sections if scripts & set(SCRIPT.findall(s)))) \
            if scripts else everywhere
        if scripts and not pool:
            missing.append("%s: no section of %s names it" % (", ".join(sorted(scripts)), bench_path))
            continue
        # Links and code spans name files and commands, not figures.
        prose = re.sub(r"\]\([^)]*\)", "]", bullet)
        prose = re.sub(r"`[^`]*`", "", prose)
        for n in NUMBER.findall(prose):
            if n not in pool and n.rstrip("0").rstrip(".") not in pool:
                missing.append("%s (%s)" % (n, ", ".join(sorted(scripts)) or "anywhere"))
    if missing:
        print("README.md's benchmark summary quotes figures BENCHMARKS.md does not have there:")
        for m in dict.fromkeys(missing):
            print("  " + m)
        return 1
    print("README.md's benchmark summary: every figure stands in BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
