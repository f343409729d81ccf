#!/usr/bin/env python3
"""The floor of scripts/bench_numpy.py's step: the same work with no allocation at all.

The step (see bench_numpy.py) run into preallocated outputs, laid out in one buffer, each on a
64-byte line and 64 bytes apart modulo 4 KiB (so no copy hits the 4K-aliasing trap of rep movsb:
see scripts/memcpy_alias.c). No allocator can make the step faster than this, so plain / floor
bounds the speed-up any allocator can give over plain glibc.

Two floors: one buffer from NumPy (glibc: small pages), and one mapped with mmap and advised onto
transparent huge pages (MADV_HUGEPAGE, 2 MiB aligned), as the arena advises a large capacity;
the table's ratio uses the faster. For arrays past the caches (8 and 64 MiB) this is no bound:
the floor's eight distinct buffers (80 MiB at 8 MiB) are a larger working set than the
allocators' step, whose freed temporaries come back at the same addresses.

    target/py/bin/python scripts/bench_numpy_floor.py [--rounds 3]
"""
import argparse
import mmap
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_numpy import SIZES, STEPS, numpy_step  # noqa: E402  (the same step and sizes)


HUGE = 2 << 20


def huge_pool(count):
    """`count` float64 in anonymous memory advised onto transparent huge pages, 2 MiB aligned.
    The mapping is kept alive by the array (np.frombuffer holds the mmap object)."""
    nbytes = count * 8 + HUGE
    m = mmap.mmap(-1, nbytes + HUGE)
    whole = np.frombuffer(m, dtype=np.uint8)
    skip = -whole.ctypes.data % HUGE
    if hasattr(m, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE, skip, nbytes)
    return whole[skip:skip + count * 8].view(np.float64)


def measure(size_name, rounds, huge=False):
    nbytes = SIZES[size_name]
    n = nbytes // 8
    rng = np.random.default_rng(1)
    pool = huge_pool(8 * n + 1024) if huge else np.empty(8 * n + 1024)
    cursor = [(-pool.ctypes.data % 64) // 8]

    def take(k):
        start = cursor[0]
        cursor[0] += k + 8  # the next array starts 64 bytes further
        return pool[start:start + k]

    a, b = take(n), take(n)
    a[:] = rng.random(n)
    b[:] = rng.random(n)
    c, d, e, f, t = take(n), take(2 * n), take(n), take(n), take(n)

    def plain_step():
        return numpy_step(np, a, b)

    def floor_step():
        np.multiply(a, 1.5, out=t)
        np.add(t, b, out=c)
        d[:n] = c
        d[n:] = b
        np.multiply(d[::2], 2.0, out=e)
        np.abs(e, out=t)
        np.sqrt(t, out=t)
        np.subtract(t, c, out=f)
        return f[-1]

    assert plain_step() == floor_step()
    result = {}
    for fn in (plain_step, floor_step):
        times = []
        for _ in range(rounds):
            fn()
            t0 = time.perf_counter()
            for _ in range(STEPS[size_name]):
                fn()
            times.append((time.perf_counter() - t0) / STEPS[size_name] * 1e6)
        result[fn.__name__] = statistics.median(times)
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="1K,64K,8M,64M")
    args = ap.parse_args()
    print("| array size | plain us | floor us | floor, huge pages us | plain / fastest floor "
          "(the most any allocator can give) |")
    print("|---|---:|---:|---:|---:|")
    for name in args.sizes.split(","):
        r = measure(name, args.rounds)
        h = measure(name, args.rounds, huge=True)
        best = min(r["floor_step"], h["floor_step"])
        print(f"| {name} | {r['plain_step']:.3g} | {r['floor_step']:.3g} | {h['floor_step']:.3g} | "
              f"{r['plain_step'] / best:.2f}x |")


if __name__ == "__main__":
    main()
