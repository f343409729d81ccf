#!/usr/bin/env python3
"""The demo's measurements (scripts/demo.sh): for each way in, the library against what that
user would otherwise use, time and peak RSS side by side, and what the numbers say.

  1. Rust, #[global_allocator]: ResizeAlloc against System, the mimalloc crate and bumpalo's
     explicit arena, on a request whose temporaries all die in it (a boxed tree) and on two
     whose blocks escape (a long-lived cache, results handed from a rayon pool to the caller);
  2. C under LD_PRELOAD (scripts/demo_app.c, which marks its iterations with regions when the
     library is there): small blocks only, large blocks only, and image frames above glibc's
     mmap ceiling, against glibc, mimalloc 3 and tcmalloc;
  3. an unmodified Python program under RESIZEALLOC_REGION=process, and the same with two
     ctypes calls per step;
  4. NumPy temporaries under the Python package's region(), without LD_PRELOAD, at a small and
     a large array size, against plain NumPy and NumPy under mimalloc 3.

Each configuration runs in its own process, the configurations alternating, DEMO_RUNS times
(default 3); the tables show medians. Peak RSS is each process's own VmHWM (the programs print
it), except NumPy's (ru_maxrss of the child). Every "faster"/"slower" printed is computed from
the medians; the last section lists every comparison the library does not win.

Fails loudly (exit 1) when the library does not load, a preloaded run does not report the
library's regions, a run fails, or the configurations disagree on a checksum.

usage: demo_run.py LIBRARY PYTHON DEMO_APP EXAMPLES_DIR VENV_PYTHON
       (MIMALLOC3 and TCMALLOC in the environment: the LD_PRELOAD libraries; a missing one is
       left out with a line saying so)
"""
import os
import re
import statistics
import subprocess
import sys

LIB, PY, APP, EXAMPLES, VENV_PY = sys.argv[1:6]
RUNS = int(os.environ.get("DEMO_RUNS", "3"))
PEERS = [(name, os.environ.get(var, "")) for name, var in (("mimalloc 3", "MIMALLOC3"), ("tcmalloc", "TCMALLOC"))]
LOSSES = []  # (part, row, what the library is slower or larger than)


def fail(msg):
    print("demo: FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def run(argv, preload=None, env_extra=None):
    """Runs argv with LD_PRELOAD=preload (a path, or None); returns its stdout."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("RESIZEALLOC_")}
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(env_extra or {})
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    if "cannot be preloaded" in err or "ERROR: ld.so" in err:
        fail("%s did not load: %s" % (preload, err.strip()))
    if p.returncode != 0:
        fail("%s exited with %d\n%s%s" % (" ".join(argv), p.returncode, out, err))
    return out


def check_library_loads():
    """A preloaded process must find the library's C API among its own symbols."""
    probe = "import ctypes; print(hasattr(ctypes.CDLL(None), 'resize_region_depth'))"
    if run([PY, "-c", probe], preload=LIB).strip() != "True":
        fail("%s is preloaded but resize_region_depth is not in the process" % LIB)


def peers():
    """The LD_PRELOAD peers that are there; says which are not."""
    here = []
    for name, path in PEERS:
        if path and os.path.exists(path):
            here.append((name, path))
        else:
            print("  (%s is not there (%r): its column is left out; scripts/demo.sh builds or installs it)" % (name, path))
    return here


def measure(rows, configs, parse):
    """rows: [(row label, argv suffix)]; configs: [(label, argv prefix, preload, env)], None
    argv prefix = not applicable to this row set. Runs each (row, config) RUNS times,
    alternating; parse(stdout) -> (time, checksum, peak MiB, regions or None). Returns
    {(row, config): (median time, median MiB)} and fails on differing checksums."""
    samples = {}
    checks = {}
    for _ in range(RUNS):
        for row, args, only in rows:
            for label, argv, preload, env in configs:
                if only and label not in only:
                    continue
                t, check, mib, regions = parse(run(argv + args, preload, env))
                if preload == LIB and regions is not None and regions.startswith("unavailable"):
                    fail("%s under the library did not mark its regions (is it loaded?)" % row)
                samples.setdefault((row, label), []).append((t, mib))
                checks.setdefault(row, set()).add(check)
    for row, cs in checks.items():
        if len(cs) != 1:
            fail("%s: the configurations disagree: checksums %s" % (row, sorted(cs)))
    return {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in samples.items()}


def figure(t):
    """A time as it reads best: 3 significant digits, thousands separated."""
    return "{:,.0f}".format(t) if t >= 100 else "%.3g" % t


def table(title, unit, rows, labels, res):
    print("  " + title)
    width = max(len(r[0]) for r in rows) + 2
    print("    %-*s" % (width, "") + "".join("%22s" % l for l in labels))
    for row, *_ in rows:
        cells = []
        for l in labels:
            if (row, l) in res:
                t, mib = res[(row, l)]
                cells.append("%10s %-3s %5.1f MiB" % (figure(t), unit, mib))
            else:
                cells.append("%22s" % "n/a")
        print("    %-*s" % (width, row) + "".join("%22s" % c for c in cells))


# Medians of a few runs on a busy machine move by a few percent: closer than this is "level".
LEVEL = 0.05


def conclude(part, row, res, ours, others, why=""):
    """One computed line: ours against each of others, in time and peak RSS; records what it
    does not win (slower by more than LEVEL, or a peak RSS over max(1.25x, +8 MiB) the
    other's)."""
    if (row, ours) not in res:
        return
    t, m = res[(row, ours)]
    parts = []
    for o in others:
        if (row, o) not in res:
            continue
        to, mo = res[(row, o)]
        if abs(t / to - 1) <= LEVEL:
            parts.append("level with %s (%.2fx its time)" % (o, t / to))
        elif t < to:
            parts.append("%.2fx faster than %s" % (to / t, o))
        else:
            parts.append("%.2fx slower than %s" % (t / to, o))
            LOSSES.append((part, row, "%.2fx %s's time" % (t / to, o)))
        if m > max(1.25 * mo, mo + 8):
            LOSSES.append((part, row, "peak RSS %.1f MiB, %s %.1f MiB" % (m, o, mo)))
    rss = ", ".join("%s %.1f" % (o, res[(row, o)][1]) for o in others if (row, o) in res)
    print("    %s: %s: %s; peak RSS %.1f MiB (%s)%s" % (row, ours, "; ".join(parts), m, rss, why))


# ---- 1. Rust ----

def rust_parse(out):
    m = re.search(r"RESULT \S+ (\d+) ns check=(\d+)", out)
    r = re.search(r"PEAK_RSS (\d+)", out)
    if not m or not r:
        fail("unexpected output: " + out)
    return int(m.group(1)) / 1000.0, m.group(2), int(r.group(1)) / 1024.0, None


print("(median of %d runs each, configurations alternating; peak RSS: each process's own)" % RUNS)
print()
print("== 1. Rust: #[global_allocator], a region per request (examples/workloads/)")
bins = {l: [os.path.join(EXAMPLES, "workloads_" + b)] for l, b in
        (("System", "system"), ("mimalloc crate", "mimalloc"), ("ResizeAlloc", "resize"), ("bumpalo arena", "bumpalo"))}
rust_configs = [(l, argv, None, {"WORKLOAD_RSS": "1"}) for l, argv in bins.items()]
rust_rows = [
    ("tree: 4,095 boxed nodes built, summed, dropped", ["--only", "tree"], None),
    ("cache: a long-lived HashMap fed by requests", ["--only", "cache"], ("System", "mimalloc crate", "ResizeAlloc")),
    ("results: rayon tasks' results to the caller", ["--only", "results"], ("System", "mimalloc crate", "ResizeAlloc")),
]
rust = measure(rust_rows, rust_configs, rust_parse)
table("us per request and peak RSS (bumpalo: an explicit arena that frees nothing; it cannot keep"
      " blocks past a reset, so it runs only the tree)", "us", rust_rows, list(bins), rust)
print("  shows:")
conclude("Rust", rust_rows[0][0], rust, "ResizeAlloc", ["System", "mimalloc crate", "bumpalo arena"],
         " (bumpalo's nodes are never freed one by one)")
for row, *_ in rust_rows[1:]:
    conclude("Rust", row, rust, "ResizeAlloc", ["System", "mimalloc crate"], " (blocks escape the regions)")

# ---- 2. C under LD_PRELOAD ----


def app_parse(out):
    m = re.search(r"([0-9.]+) us per iteration, checksum (\d+), peak RSS (\d+) KiB, regions (\S+)", out)
    if not m:
        fail("unexpected output: " + out)
    return float(m.group(1)), m.group(2), int(m.group(3)) / 1024.0, m.group(4)


print()
print("== 2. C under LD_PRELOAD: a program whose iterations are regions (scripts/demo_app.c; it")
print("      finds resize_region_begin/end with dlsym, so the same binary runs everywhere)")
check_library_loads()
PRESENT = peers()  # said once; part 4 takes its mimalloc 3 from here too
c_configs = [("glibc", [APP], None, {})] + [(n, [APP], p, {}) for n, p in PRESENT] + [("libresizealloc.so", [APP], LIB, {})]
c_rows = [
    ("small: 256 blocks of 16 B..9 KiB", ["small"], None),
    ("large: 8 blocks of 256 KiB..4 MiB", ["large"], None),
    ("frames: two 48 MiB frames + scratch", ["frames"], None),
]
c = measure(c_rows, c_configs, app_parse)
c_labels = [x[0] for x in c_configs]
table("us per iteration and peak RSS", "us", c_rows, c_labels, c)
print("  shows:")
for row, *_ in c_rows:
    conclude("C", row, c, "libresizealloc.so", c_labels[:-1])

# ---- 3. an unmodified Python program ----


def py_parse(out):
    m = re.search(r"([0-9.]+) ms per step, checksum (\d+), peak RSS (\d+) KiB, regions (.*)", out)
    if not m:
        fail("unexpected output: " + out)
    return float(m.group(1)), m.group(2), int(m.group(3)) / 1024.0, m.group(4).strip()


print()
print("== 3. An unmodified Python program (scripts/demo_py.py: a 40 MiB translate cut into 4 MiB")
print("      blocks, four of them upper-cased, per step)")
py_configs = [("plain malloc", [PY, "scripts/demo_py.py"], None, {}),
              ("process mode", [PY, "scripts/demo_py.py", "--no-markers"], LIB, {"RESIZEALLOC_REGION": "process"}),
              ("ctypes markers", [PY, "scripts/demo_py.py"], LIB, {})]
py_rows = [("translate and upper-case", [], None)]
py = measure(py_rows, py_configs, py_parse)
table("ms per step and peak RSS", "ms", py_rows, [x[0] for x in py_configs], py)
print("  shows:")
conclude("Python", py_rows[0][0], py, "process mode", ["plain malloc"], " (no change to the program)")
conclude("Python", py_rows[0][0], py, "ctypes markers", ["plain malloc"], " (two ctypes calls a step)")

# ---- 4. NumPy through the package ----


def numpy_parse(out):
    m = re.search(r"RESULT ([0-9.]+) (\d+) (\S+)", out)
    if not m:
        fail("unexpected output: " + out)
    return float(m.group(1)), m.group(3), int(m.group(2)) / 1024.0, None


print()
print("== 4. NumPy temporaries per step under resizealloc.region(), the Python package without")
print("      LD_PRELOAD (scripts/bench_numpy.py's step: an expression, a concatenate, a strided")
print("      slice, a sqrt)")
if subprocess.run([VENV_PY, "-c", "import numpy, resizealloc"], capture_output=True).returncode != 0:
    fail("%s cannot import numpy and resizealloc (scripts/python_env.sh installs them)" % VENV_PY)
mi3 = dict(PRESENT).get("mimalloc 3")
np_configs = [("plain NumPy", [VENV_PY, "scripts/bench_numpy.py", "--child", "plain"], None, {})]
if mi3:
    np_configs.append(("NumPy, mimalloc 3", [VENV_PY, "scripts/bench_numpy.py", "--child", "plain"], mi3, {}))
np_configs.append(("region()", [VENV_PY, "scripts/bench_numpy.py", "--child", "region"], None, {}))
np_rows = [("64 KiB arrays", ["64K", "2"], None), ("8 MiB arrays", ["8M", "2"], None)]
npr = measure(np_rows, np_configs, numpy_parse)
table("us per step and peak RSS (ru_maxrss)", "us", np_rows, [x[0] for x in np_configs], npr)
print("  shows:")
for row, *_ in np_rows:
    conclude("NumPy", row, npr, "region()", [x[0] for x in np_configs[:-1]])

# ---- what it does not win ----

print()
print("== Where the library does not win in this run")
if LOSSES:
    for part, row, what in LOSSES:
        print("  %s, %s: %s" % (part, row, what))
else:
    print("  nowhere in this run (BENCHMARKS.md has the cells where it loses, measured over more rounds)")
print("  (slower by more than %d %%, or a peak RSS over max(1.25x, +8 MiB) the other's)" % (LEVEL * 100))
