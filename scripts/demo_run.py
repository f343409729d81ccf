#!/usr/bin/env python3
"""The LD_PRELOAD parts of the demo (scripts/demo.sh): each workload runs on plain malloc, under
mimalloc (the allocator a user would pick instead; the C program) and under libresizealloc.so,
the configurations alternating, DEMO_RUNS times (default 3); prints
the median time and the median peak RSS side by side. The programs report their own peak RSS
(VmHWM): getrusage's ru_maxrss of a child also counts this script's memory from before the exec.

Fails loudly (exit 1) when the library does not load (ld.so's "cannot be preloaded", or its C
API missing in a preloaded process), when a preloaded run does not report the library's
regions, when a run fails, or when the configurations disagree on a checksum.

usage: demo_run.py LIBRARY PYTHON DEMO_APP
"""
import os
import re
import statistics
import subprocess
import sys

LIB, PY, APP = sys.argv[1:4]
RUNS = int(os.environ.get("DEMO_RUNS", "3"))
MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"  # scripts/setup.sh installs it


def fail(msg):
    print("demo: FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def run(argv, preload, env_extra=()):
    """Runs argv with the library preloaded (True), nothing (False) or another library (a
    path); returns its stdout."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("RESIZEALLOC_")}
    if preload is True:
        env["LD_PRELOAD"] = LIB
    elif preload:
        env["LD_PRELOAD"] = preload
    env.update(env_extra)
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    if "cannot be preloaded" in err or "ERROR: ld.so" in err:
        fail("libresizealloc.so did not load: " + err.strip())
    if p.returncode != 0:
        fail("%s exited with %d\n%s%s" % (" ".join(argv), p.returncode, out, err))
    return out


def check_library_loads():
    """A preloaded process must find the library's C API among its own symbols."""
    probe = "import ctypes; print(hasattr(ctypes.CDLL(None), 'resize_region_depth'))"
    out = run([PY, "-c", probe], preload=True)
    if out.strip() != "True":
        fail("%s is preloaded but resize_region_depth is not in the process" % LIB)


def parse(out, unit):
    """(time, checksum, peak RSS KiB, regions) from a workload's line."""
    m = re.search(r"([0-9.]+) %s per (?:iteration|step), checksum (\d+), peak RSS (\d+) KiB, regions (.*)" % unit, out)
    if not m:
        fail("unexpected output: " + out)
    return float(m.group(1)), m.group(2), int(m.group(3)), m.group(4).strip()


def measure(title, argv, unit, configs, shown_unit=None, scale=1.0):
    """configs: (label, preload, env, extra args, expected 'regions' prefix); the first one is
    the baseline. Prints one line per configuration (times in `unit` multiplied by `scale`, as
    `shown_unit`); returns {label: (time, peak RSS MiB)}."""
    check_library_loads()
    times = {c[0]: [] for c in configs}
    rss = {c[0]: [] for c in configs}
    checksums = set()
    for _ in range(RUNS):
        for label, preload, env, extra, regions in configs:
            t, checksum, peak, got = parse(run(argv + extra, preload, env), unit)
            if not got.startswith(regions):
                fail("%s, %s: regions %r, expected %r (is the library loaded?)" % (title, label, got, regions))
            times[label].append(t)
            rss[label].append(peak)
            checksums.add(checksum)
    if len(checksums) != 1:
        fail("%s: the configurations disagree: checksums %s" % (title, sorted(checksums)))
    result = {c[0]: (statistics.median(times[c[0]]), statistics.median(rss[c[0]]) / 1024) for c in configs}
    print("  " + title)
    for label, *_ in configs:
        t, mib = result[label]
        print("    %-26s %8.2f %s per step   peak RSS %6.1f MiB" % (label, t * scale, shown_unit or unit, mib))
    return result


def versus(result, base, other):
    """'2.10x faster, peak RSS +1% (+1.2 MiB)' for configuration `other` against `base`."""
    (tb, mb), (to, mo) = result[base], result[other]
    speed = "%.2fx faster" % (tb / to) if to <= tb else "%.2fx slower" % (to / tb)
    return "%s, peak RSS %+.0f%% (%+.1f MiB)" % (speed, (mo - mb) * 100 / mb, mo - mb)


print("(median of %d runs each, configurations alternating; peak RSS: each process's VmHWM)" % RUNS)
print()
print("== 2. A C program whose iterations are regions (scripts/demo_app.c), plain malloc,")
print("      LD_PRELOAD=libmimalloc.so.2 and LD_PRELOAD=libresizealloc.so; the program finds the")
print("      markers with dlsym")
plain = ("plain malloc", False, {}, [], "unavailable")
marked = ("libresizealloc.so", True, {}, [], "marked")
configs = [plain, marked]
if os.path.exists(MIMALLOC):
    configs.insert(1, ("mimalloc", MIMALLOC, {}, [], "unavailable"))
else:
    print("  (mimalloc is not installed at %s: its runs are left out; scripts/setup.sh installs it)" % MIMALLOC)
small = measure("small temporaries: 256 of 16 B..9 KiB and one 1 MiB buffer per iteration",
                [APP, "small"], "us", configs)
print("  shows: small temporaries are bumps in the arena instead of mallocs: %s"
      % versus(small, "plain malloc", "libresizealloc.so"))
if "mimalloc" in small:
    print("         against mimalloc: %s" % versus(small, "mimalloc", "libresizealloc.so"))
frames = measure("image frames: two 48 MiB frames and 15 MiB of scratch per iteration",
                 [APP, "frames"], "us", configs, shown_unit="ms", scale=1e-3)
print("  shows: the arena keeps the frames' memory, glibc maps them afresh (above its 32 MiB mmap")
print("         ceiling) and faults every page in again: %s" % versus(frames, "plain malloc", "libresizealloc.so"))
if "mimalloc" in frames:
    print("         against mimalloc: %s" % versus(frames, "mimalloc", "libresizealloc.so"))
print()
print("== 3. Python (scripts/demo_py.py), steps with large temporaries")
py = measure("a 40 MiB translate cut into 4 MiB blocks, four of them upper-cased, per step",
             [PY, "scripts/demo_py.py"], "ms",
             [("plain malloc", False, {}, [], "unavailable"),
              ("ctypes region markers", True, {}, [], "marked"),
              ("unmodified, process mode", True, {"RESIZEALLOC_REGION": "process"}, ["--no-markers"], "process")])
print("  shows: two ctypes calls per step: %s;" % versus(py, "plain malloc", "ctypes region markers"))
print("         the unmodified script under RESIZEALLOC_REGION=process: %s"
      % versus(py, "plain malloc", "unmodified, process mode"))
