"""report.py: the markdown tables of scripts/mem_bench.sh.

    python3 report.py RAW_DIR "ALLOCATORS" "PROGRAMS"

Reads RAW_DIR/<program>.<allocator>.<round>.{rusage,out} and prints three tables, each cell a
median over rounds: peak RSS (with the bound resizealloc must meet), wall time relative to
glibc, and the programs' own figures. A run that crashed, timed out or printed a different
result than glibc's first run is named in the table, never averaged in.
"""
import glob
import os
import statistics
import sys

raw, allocs, progs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
RZ = [a for a in allocs if a.startswith("rz-")]
MIB = 1024.0
# The programs' own figures worth a column: (program, metric, label, higher is better)
OWN = [
    ("server", "ops_per_s", "server: k ops/s", True),
    ("loader", "records_per_s", "loader: k records/s", True),
    ("churn-small", "ops_per_s", "churn-small: k ops/s", True),
    ("churn-log", "ops_per_s", "churn-log: k ops/s", True),
    ("lru", "regions_per_s", "lru: k regions/s", True),
    ("phase", "rss_after_kib", "phase: RSS after steady work, MiB", False),
    ("phase", "steady_ops_per_s", "phase: steady k ops/s", True),
    ("grow", "steps_per_s", "grow: k realloc steps/s", True),
    ("calloc", "repeat_per_s", "calloc: 256 MiB callocs/s, memory reused", True),
    ("calloc", "filled_per_s", "calloc: 64 MiB callocs/s, each filled", True),
    ("freed-phase", "rss_1s_kib", "freed-phase: RSS 1 s after the phase, MiB", False),
]


def load(prog, alloc):
    """[(rusage dict, output lines, metrics dict)] over rounds, in round order."""
    runs = []
    paths = glob.glob(os.path.join(raw, f"{prog}.{alloc}.*.rusage"))
    for path in sorted(paths, key=lambda p: int(p.rsplit(".", 2)[1])):
        ru = dict(kv.split("=", 1) for kv in open(path).read().split())
        out_path = path[: -len(".rusage")] + ".out"
        lines = open(out_path, errors="replace").read().splitlines() if os.path.exists(out_path) else []
        metrics = {}
        for line in lines:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "metric":
                metrics[parts[1]] = float(parts[2])
        result = [line for line in lines if not line.startswith("metric ")]
        runs.append((ru, result, metrics))
    return runs


data = {(p, a): load(p, a) for p in progs for a in allocs}


def status(p, a):
    """'' when every round exited 0, else what went wrong."""
    bad = [ru["status"] for ru, _, _ in data[p, a] if ru["status"] != "0"]
    if not data[p, a]:
        return "not run"
    if not bad:
        return ""
    if any(s.startswith("timeout") or s in ("124", "137") for s in bad):
        return "timeout"
    return "exit " + "/".join(sorted(set(bad)))


def median(p, a, get):
    vals = [get(ru, m) for ru, _, m in data[p, a] if ru["status"] == "0"]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def rss_mib(p, a):
    return median(p, a, lambda ru, m: int(ru["maxrss_kib"]) / MIB)


def wall_s(p, a):
    return median(p, a, lambda ru, m: float(ru["wall_s"]))


def fmt(x, unit=""):
    if x is None:
        return "n/a"
    if x >= 100:
        return f"{x:.0f}{unit}"
    return f"{x:.1f}{unit}" if x >= 10 else f"{x:.2f}{unit}"


def cell(p, a, value):
    st = status(p, a)
    if value is None:
        return st.upper() or "n/a"
    return value + (f" ({st})" if st else "")


def outputs(p):
    """Do all successful runs print what glibc's first run printed?"""
    ref = next((res for ru, res, _ in data[p, allocs[0]] if ru["status"] == "0"), None)
    if ref is None:
        return "no reference"
    differ = sorted({a for a in allocs for ru, res, _ in data[p, a] if ru["status"] == "0" and res != ref})
    broken = [line for line in ref if "DIFFERENT" in line]
    if broken:
        return "glibc: " + broken[0]
    return "identical" if not differ else "DIFFERENT: " + ", ".join(differ)


print("### Peak RSS (MiB, ru_maxrss, median)")
print()
hdr = ["program"] + allocs + [f"{a} / glibc" for a in RZ] + ["bound"] + [f"{a} vs bound" for a in RZ] + ["outputs"]
print("| " + " | ".join(hdr) + " |")
print("|---|" + "---:|" * (len(allocs) + 2 * len(RZ) + 1) + "---|")
for p in progs:
    g = rss_mib(p, "glibc")
    row = [p] + [cell(p, a, None if rss_mib(p, a) is None else fmt(rss_mib(p, a))) for a in allocs]
    bound = None if g is None else max(1.25 * g, g + 8)
    for a in RZ:
        v = rss_mib(p, a)
        row.append("n/a" if v is None or not g else f"{v / g:.2f}x")
    row.append(fmt(bound))
    for a in RZ:
        v, st = rss_mib(p, a), status(p, a)
        if bound is None or (v is None and not st):
            row.append("n/a")
        elif st or v > bound:
            row.append("**FAIL**" + (f" ({st})" if st else ""))
        else:
            row.append("PASS")
    row.append(outputs(p))
    print("| " + " | ".join(row) + " |")
print()
print("bound = max(1.25 x glibc, glibc + 8 MiB); rz-process = `RESIZEALLOC_REGION=process`,")
print("rz-markers = the default mode (only the programs' `resize_region_begin/end` regions go to the arena).")
print()

print("### Wall time (glibc in seconds, the others relative to it, median)")
print()
others = allocs[1:]
print("| program | glibc s | " + " | ".join(others) + " |")
print("|---|---:|" + "---:|" * len(others))
for p in progs:
    g = wall_s(p, "glibc")
    row = [p, cell(p, "glibc", None if g is None else fmt(g))]
    for a in others:
        v = wall_s(p, a)
        row.append(cell(p, a, None if v is None or not g else f"{v / g:.2f}x"))
    print("| " + " | ".join(row) + " |")
print()

own = [(p, m, label, hi) for p, m, label, hi in OWN if p in progs]
if own:
    print("### The programs' own figures (median)")
    print()
    print("| figure | " + " | ".join(allocs) + " |")
    print("|---|" + "---:|" * len(allocs))
    for p, m, label, hi in own:
        div = 1.0 if m in ("repeat_per_s", "filled_per_s") else 1000.0 if m.endswith("_per_s") else MIB
        row = [label]
        for a in allocs:
            v = median(p, a, lambda ru, mm: mm.get(m))
            row.append(cell(p, a, None if v is None else fmt(v / div)))
        print("| " + " | ".join(row) + " |")
