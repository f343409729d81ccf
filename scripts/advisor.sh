#!/usr/bin/env bash
# The region advisor (RESIZEALLOC_PROFILE), measured:
#  1. its estimate against the real saving: preload/tests/c/advisor.c (temporaries in
#     parse_request and score_batch, long-lived nodes from remember) is profiled; the report's
#     estimated saving for parse_request is set against the time a region around each of its
#     calls saves (the loop's time without regions less with them, the library preloaded both
#     times, without the profiler); the same for its Rust twin, examples/advisor.rs under
#     ResizeAlloc;
#  2. its overhead at the default rate: the same programs with and without the profiler, all
#     under the library: advisor.c without regions, the benchmark matrix's C program
#     (scripts/matrix.c) and its Rust request workloads (examples/workloads: JSON, tree, text,
#     CSV under ResizeAlloc), each with its regions and with RESIZEALLOC_REGION=off (everything
#     outside regions, as an unmodified program), and python3 on an allocation-heavy script.
# Whole processes are timed, so the report at exit (symbolising the stacks) counts too.
#  3. the same overhead in instructions (callgrind, repeatable where times on a shared machine
#     are not), on shorter runs of the programs outside regions: advisor.c (20,000 rounds),
#     matrix.c --quick and the Rust workloads --quick with RESIZEALLOC_REGION=off.
# Interleaved over ROUNDS rounds; medians (of per-round ratios for the overhead).
#   ROUNDS=5 (default)
# Writes target/advisor/results.md (and prints it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-5}
OUT=$ROOT/target/advisor
mkdir -p "$OUT"
cargo build -q --release -p resizealloc-preload
cargo build -q --release --example workloads_resize --example advisor
RUST_ADVISOR=$ROOT/target/release/examples/advisor
SO=$ROOT/target/release/libresizealloc.so
# The interpreter itself (a pyenv shim is a shell script: it would be measured, and profiled).
PY=$(python3 -c 'import sys; print(sys.executable)')
cc -O2 -g -pthread -o "$OUT/advisor" preload/tests/c/advisor.c -ldl
gcc -std=gnu11 -O2 -Wall -o "$OUT/matrix" scripts/matrix.c -ldl -lm
cat >"$OUT/alloc_heavy.py" <<'PY'
# Allocation-heavy Python: JSON documents parsed, walked and rebuilt; dicts, lists, strings.
import json, random
random.seed(7)
docs = [json.dumps({"id": i, "tags": [f"t{j}" for j in range(random.randrange(1, 30))],
                    "body": "x" * random.randrange(10, 2000),
                    "nested": {"k%d" % j: list(range(j)) for j in range(random.randrange(1, 12))}})
        for i in range(400)]
total = 0
for step in range(240):
    for d in docs:
        o = json.loads(d)
        o["tags"] = sorted(set(o["tags"]))
        total += len(json.dumps(o)) + sum(len(v) for v in o["nested"].values())
print(total)
PY
loop_ns() { grep -o 'loop_ns [0-9]*' | awk '{print $2}'; }
# The report's estimated saving for parse_request, in ns.
estimate() {
    awk '/parse_request/ && $1 ~ /^[0-9]+$/ {
           v = $7; u = $8; m = (u == "s") ? 1e9 : (u == "ms") ? 1e6 : 1e3; print v * m; exit }' "$1"
}
now() { date +%s%N; }
RAW=$OUT/raw.txt
: >"$RAW"
for ((r = 1; r <= ROUNDS; r++)); do
    plain=$(LD_PRELOAD=$SO "$OUT/advisor" plain 2>&1 >/dev/null | loop_ns)
    region=$(LD_PRELOAD=$SO "$OUT/advisor" region 2>&1 >/dev/null | loop_ns)
    rm -f "$OUT/report"
    profiled=$(RESIZEALLOC_PROFILE=$OUT/report LD_PRELOAD=$SO "$OUT/advisor" plain 2>&1 >/dev/null | loop_ns)
    est=$(estimate "$OUT/report")
    echo "advisor $plain $region $profiled $est" >>"$RAW"
    plain=$("$RUST_ADVISOR" plain 2>&1 >/dev/null | loop_ns)
    region=$("$RUST_ADVISOR" region 2>&1 >/dev/null | loop_ns)
    rm -f "$OUT/report-rust-advisor"
    profiled=$(RESIZEALLOC_PROFILE=$OUT/report-rust-advisor "$RUST_ADVISOR" plain 2>&1 >/dev/null | loop_ns)
    est=$(estimate "$OUT/report-rust-advisor")
    echo "rust_advisor $plain $region $profiled $est" >>"$RAW"
    for mode in on off; do
        t0=$(now); RESIZEALLOC_REGION=$mode LD_PRELOAD=$SO "$OUT/matrix" >/dev/null; t1=$(now)
        RESIZEALLOC_PROFILE=$OUT/report-matrix RESIZEALLOC_REGION=$mode LD_PRELOAD=$SO "$OUT/matrix" >/dev/null; t2=$(now)
        echo "c_$mode $((t1 - t0)) $((t2 - t1))" >>"$RAW"
        t0=$(now); RESIZEALLOC_REGION=$mode target/release/examples/workloads_resize >/dev/null; t1=$(now)
        RESIZEALLOC_PROFILE=$OUT/report-rust RESIZEALLOC_REGION=$mode target/release/examples/workloads_resize >/dev/null; t2=$(now)
        echo "rust_$mode $((t1 - t0)) $((t2 - t1))" >>"$RAW"
    done
    t0=$(now); LD_PRELOAD=$SO "$PY" "$OUT/alloc_heavy.py" >/dev/null; t1=$(now)
    RESIZEALLOC_PROFILE=$OUT/report-py LD_PRELOAD=$SO "$PY" "$OUT/alloc_heavy.py" >/dev/null; t2=$(now)
    echo "python $((t1 - t0)) $((t2 - t1))" >>"$RAW"
    echo "round $r of $ROUNDS done" >&2
done
python3 - "$RAW" >"$OUT/results.md" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = statistics.median
for key, label in (("advisor", "advisor.c (200,000 rounds)"),
                   ("rust_advisor", "examples/advisor.rs under ResizeAlloc (100,000 rounds)")):
    adv = [list(map(float, r[1:])) for r in rows if r[0] == key]
    measured = med(a[0] - a[1] for a in adv)
    estimate = med(a[3] for a in adv)
    print(f"| {label} | median |")
    print("|---|---|")
    print(f"| loop without regions | {med(a[0] for a in adv) / 1e6:.1f} ms |")
    print(f"| loop with a region per parse_request call | {med(a[1] for a in adv) / 1e6:.1f} ms |")
    print(f"| measured saving | {measured / 1e6:.1f} ms |")
    print(f"| the report's estimate for parse_request | {estimate / 1e6:.1f} ms |")
    print(f"| estimate / measured | {estimate / measured:.2f} |")
    print()
adv = [list(map(float, r[1:])) for r in rows if r[0] == "advisor"]
print("| program, under the library | profiler overhead at the default rate (time with / without, median of per-round ratios) |")
print("|---|---|")
print(f"| advisor.c, no regions (about 25 GB/s allocated) | {med(a[2] / a[0] for a in adv):.3f}x |")
names = {"c_on": "C benchmark matrix (scripts/matrix.c), a region per step",
         "c_off": "the same with RESIZEALLOC_REGION=off (all outside regions)",
         "rust_on": "Rust request workloads (examples/workloads), a region per request",
         "rust_off": "the same with RESIZEALLOC_REGION=off (all outside regions)",
         "python": "python3, allocation-heavy JSON/dict script (about 2 s)"}
for k, label in names.items():
    rs = [list(map(float, r[1:])) for r in rows if r[0] == k]
    print(f"| {label} | {med(b / a for a, b in rs):.3f}x |")
PY
instructions() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
        grep -o 'Collected : [0-9]*' | awk '{print $3}'
}
if command -v valgrind >/dev/null; then
    {
        echo
        echo "| program outside regions, under the library | instructions without the profiler | with it | ratio |"
        echo "|---|---:|---:|---:|"
        # label|LD_PRELOAD|command (the Rust binary has ResizeAlloc built in)
        for prog in "advisor.c (20,000 rounds)|$SO|$OUT/advisor plain 20000" \
                    "C benchmark matrix (--quick)|$SO|$OUT/matrix --quick" \
                    "Rust request workloads (--quick)||target/release/examples/workloads_resize --quick"; do
            label=${prog%%|*}; rest=${prog#*|}; pre=${rest%%|*}; cmd=${rest#*|}
            a=$(RESIZEALLOC_REGION=off LD_PRELOAD=$pre instructions $cmd)
            b=$(RESIZEALLOC_PROFILE=$OUT/report-cg RESIZEALLOC_REGION=off LD_PRELOAD=$pre instructions $cmd)
            echo "| $label | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3fx", b / a }') |"
        done
    } >>"$OUT/results.md"
else
    echo "SKIPPED: instruction counts (valgrind not installed)" >>"$OUT/results.md"
fi
cat "$OUT/results.md"
