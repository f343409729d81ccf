#!/usr/bin/env python3
"""NumPy temporaries per step, five ways: plain (glibc), under resizealloc.region() without
preload (the package's own arenas), the same after resizealloc.keep_numpy_handler() ("kept":
regions then leave NumPy's handler in place), under LD_PRELOAD=libresizealloc.so with region()
calling its markers, and under LD_PRELOAD=libmimalloc.so (no regions). Also a pure-Python
allocation-heavy loop (dicts, lists, bytes), plain vs region().

Each configuration runs in its own process (so that peak RSS, ru_maxrss, is its own), the
configurations interleaved round by round; the table shows medians over the rounds.

    python scripts/bench_numpy.py [--rounds N] [--lib target/release/libresizealloc.so]
                                  [--sizes 1K,64K,8M,64M] [--markdown]

The step, for arrays of S bytes (float64, S/8 elements; a and b are made once):
    c = a * 1.5 + b                   elementwise expression (NumPy elides the second temporary
                                      for arrays over 256 KiB)
    d = np.concatenate((c, b))        2 S
    e = d[::2] * 2.0                  strided slice -> S
    f = np.sqrt(np.abs(e)) - c        S (+ S temporary)
    checksum += f[-1]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
SIZES = {"1K": 1 << 10, "64K": 64 << 10, "8M": 8 << 20, "64M": 64 << 20}
# Steps per measurement, so that each takes about 0.2-1 s.
STEPS = {"1K": 100000, "64K": 20000, "8M": 200, "64M": 20}
CONFIGS = ["plain", "region", "kept", "preload", "mimalloc"]


def numpy_step(np, a, b):
    """One step: the temporaries of the module docstring; returns a checksum term. `np` is the
    numpy module (imported by the caller: the parent process runs without it)."""
    c = a * 1.5 + b
    d = np.concatenate((c, b))
    e = d[::2] * 2.0
    f = np.sqrt(np.abs(e)) - c
    return f[-1]


def child(config, size_name, reps):
    import numpy as np

    use_region = config in ("region", "kept", "preload")
    if use_region:
        import resizealloc

        if config == "kept" and not resizealloc.keep_numpy_handler():
            raise SystemExit("bench_numpy: keep_numpy_handler() kept nothing")

        region = resizealloc.region
        if config == "preload" and not resizealloc.preloaded():
            raise SystemExit("bench_numpy: preload configuration without the library preloaded")
        if config in ("region", "kept") and resizealloc.preloaded():
            raise SystemExit("bench_numpy: region configuration with the library preloaded")
    n = SIZES[size_name] // 8
    rng = np.random.default_rng(1)
    a = rng.random(n)
    b = rng.random(n)
    steps = STEPS[size_name]
    checksum = 0.0

    def step():
        return numpy_step(np, a, b)

    times = []
    for r in range(reps + 1):  # the first repetition warms up (arena sizing, page faults)
        t = time.perf_counter()
        if use_region:
            for _ in range(steps):
                with region():
                    checksum += step()
        else:
            for _ in range(steps):
                checksum += step()
        dt = (time.perf_counter() - t) / steps * 1e6
        if r:
            times.append(dt)
    extra = ""
    if use_region:
        s = resizealloc.stats()
        extra = " region_allocs %d overflow %d" % (s.thread.region_allocs, s.thread.overflow_allocs)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("RESULT %.4f %d %.6g%s" % (statistics.median(times), rss, checksum, extra))


def child_pure(config, reps):
    use_region = config == "region"
    if use_region:
        import resizealloc

        region = resizealloc.region
    steps = 20000

    def step(k):
        d = {i: str(i) for i in range(64)}
        lst = [d[i] * 3 for i in range(64)]
        blob = b"x" * 4096 + bytes(k % 251 for _ in range(16))
        joined = "".join(lst)
        return len(joined) + len(blob) + len(d)

    times = []
    checksum = 0
    for r in range(reps + 1):
        t = time.perf_counter()
        if use_region:
            for k in range(steps):
                with region():
                    checksum += step(k)
        else:
            for k in range(steps):
                checksum += step(k)
        dt = (time.perf_counter() - t) / steps * 1e6
        if r:
            times.append(dt)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("RESULT %.4f %d %d" % (statistics.median(times), rss, checksum))


def run_child(args, config, what):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("RESIZEALLOC_")}
    if config == "preload":
        env["LD_PRELOAD"] = os.path.abspath(args.lib)
    elif config == "mimalloc":
        env["LD_PRELOAD"] = MIMALLOC
    p = subprocess.run([sys.executable, __file__, "--child", config, what, str(args.reps)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT")]
    if p.returncode != 0 or not line or "cannot be preloaded" in p.stderr:
        raise SystemExit("bench_numpy: %s %s failed (%d):\n%s%s" % (config, what, p.returncode, p.stdout, p.stderr))
    parts = line[0].split()
    return float(parts[1]), int(parts[2]) / 1024.0, parts[3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--lib", default="target/release/libresizealloc.so")
    ap.add_argument("--sizes", default="1K,64K,8M,64M")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--no-pure", action="store_true")
    args = ap.parse_args()
    if args.child:
        config, what, reps = args.child
        if what == "pure":
            child_pure(config, int(reps))
        else:
            child(config, what, int(reps))
        return
    sizes = args.sizes.split(",")
    configs = [c for c in args.configs.split(",") if c]
    if "preload" in configs and not os.path.exists(args.lib):
        raise SystemExit("bench_numpy: %s not built (cargo build --release -p resizealloc-preload)" % args.lib)
    if "mimalloc" in configs and not os.path.exists(MIMALLOC):
        configs.remove("mimalloc")
    res = {}
    checks = {}
    for _ in range(args.rounds):
        for s in sizes:
            for c in configs:
                t, rss, chk = run_child(args, c, s)
                res.setdefault((s, c), []).append((t, rss))
                checks.setdefault(s, set()).add(chk)
        if not args.no_pure:
            for c in ("plain", "region"):
                t, rss, chk = run_child(args, c, "pure")
                res.setdefault(("pure", c), []).append((t, rss))
                checks.setdefault("pure", set()).add(chk)
    for s, cs in checks.items():
        if len(cs) != 1:
            raise SystemExit("bench_numpy: configurations disagree on %s: %s" % (s, sorted(cs)))

    def med(s, c, i):
        return statistics.median(x[i] for x in res[(s, c)])

    print("NumPy step (median of %d rounds x %d repetitions; us per step, peak RSS MiB)" % (args.rounds, args.reps))
    print("| array size | " + " | ".join("%s us" % c for c in configs) + " | "
          + " | ".join("%s MiB" % c for c in configs) + " | plain/region | region/mimalloc | "
          "plain/kept | kept/mimalloc | region RSS/plain |")
    print("|---|" + "---:|" * (2 * len(configs) + 5))
    nan = float("nan")
    for s in sizes:
        ts = [med(s, c, 0) for c in configs]
        rs = [med(s, c, 1) for c in configs]
        tp, tr = med(s, "plain", 0), med(s, "region", 0)
        tk = med(s, "kept", 0) if "kept" in configs else nan
        tm = med(s, "mimalloc", 0) if "mimalloc" in configs else nan
        print("| %s | %s | %s | %.2fx | %.2fx | %.2fx | %.2fx | %.2fx |" % (
            s, " | ".join("%.3g" % t for t in ts), " | ".join("%.1f" % r for r in rs),
            tp / tr, tr / tm, tp / tk, tk / tm, med(s, "region", 1) / med(s, "plain", 1)))
    if not args.no_pure:
        tp, tr = med("pure", "plain", 0), med("pure", "region", 0)
        print()
        print("pure Python step (dict of 64 str, list of 64 str, 4 KiB bytes, join): plain %.2f us, "
              "region() %.2f us (%.2fx); peak RSS %.1f / %.1f MiB"
              % (tp, tr, tp / tr, med("pure", "plain", 1), med("pure", "region", 1)))


if __name__ == "__main__":
    main()
