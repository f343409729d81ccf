#!/usr/bin/env python3
"""A/B of one program's own figure under several allocators, interleaved.

    VARIANTS="glibc=glibc,before=/tmp/old.so,after=target/release/libresizealloc.so" \
        python3 scripts/membench/ab.py ROUNDS METRIC PROGRAM [ARGS...]

Each round runs PROGRAM once per variant (the starting variant rotates from round to round);
a variant is `name=path of a library to preload`, or `name=glibc` for none. Preloaded runs get
RESIZEALLOC_REGION=$MODE (default `process`; other allocators ignore it). METRIC is the name of a
`metric NAME VALUE` line the program prints (scripts/membench/*.c). Prints, per variant, the
median value and the median of its per-round ratios to the first variant: the ratio is taken
within a round, so slow phases of this shared VM cancel out.
"""
import os
import re
import statistics
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 4 or "VARIANTS" not in os.environ:
        print(__doc__, file=sys.stderr)
        return 2
    rounds, metric, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    variants = [v.split("=", 1) for v in os.environ["VARIANTS"].split(",")]
    values = {name: [] for name, _ in variants}
    for r in range(rounds):
        k = r % len(variants)
        for name, lib in variants[k:] + variants[:k]:
            env = dict(os.environ)
            if lib != "glibc":
                env["LD_PRELOAD"] = os.path.abspath(lib)
                env["RESIZEALLOC_REGION"] = os.environ.get("MODE", "process")
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
            m = re.search(rf"^metric {re.escape(metric)} ([0-9.e+-]+)$", out, re.M)
            if not m:
                print(f"{name}: no 'metric {metric}' line", file=sys.stderr)
                return 1
            values[name].append(float(m.group(1)))
    base = variants[0][0]
    for name, _ in variants:
        ratios = [a / b for a, b in zip(values[name], values[base])]
        print(f"{name:10s} median {statistics.median(values[name]):.4g}   "
              f"ratio to {base} (median per round) {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
