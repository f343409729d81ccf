#!/usr/bin/env bash
# Workloads whose blocks escape their regions (scripts/escape/), in C and C++, under
# LD_PRELOAD: glibc, mimalloc 2.0.9 (Debian's libmimalloc2.0), mimalloc 3 (built by
# scripts/mimalloc3.sh), jemalloc, tcmalloc and libresizealloc.so in markers mode
# (RESIZEALLOC_REGION unset: the programs' own regions) and in process mode
# (RESIZEALLOC_REGION=process: every thread one long region).
#   thread_per_request  100 threads one after another, a region each of 20,000 blocks of
#                       500 B; one 64-byte session per thread outlives its thread
#   service_loop        2,000 requests on libstdc++ containers, a region each; every 50th
#                       reply is kept in a deque of the last 4 and evicted later
# Interleaved rounds (the order of allocators changes every round, scripts/round_order.sh);
# every run's checksum must equal glibc's. Each program times its own work and reports its
# ru_maxrss (getrusage at exit: the peak of the whole process).
# Table: median time, the median of the per-round ratios to glibc and to the fastest peer of
# that round (the peers: glibc, both mimallocs, jemalloc, tcmalloc), median peak RSS.
#   ROUNDS=5 (default)
#   SO=path              the libresizealloc.so measured (default target/release/libresizealloc.so;
#                        this script does not build it)
#   ONLY="service_loop"  run only these programs
# Writes target/escape/results.md (and raw/ with every run's output) and prints the table.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/round_order.sh
ROUNDS=${ROUNDS:-5}
SO=${SO:-$ROOT/target/release/libresizealloc.so}
OUT=target/escape
BIN=$OUT/bin
RAW=$OUT/raw
LIBDIR=/usr/lib/x86_64-linux-gnu
START=$(date +%s.%N)
[[ -f $SO ]] || { echo "ERROR: $SO not found (cargo build --release -p resizealloc-preload, or SO=path)" >&2; exit 1; }
SO=$(realpath "$SO")
mkdir -p "$BIN" "$RAW"
rm -f "$RAW"/*

# 1. the programs and the mimalloc 3 library
gcc -std=gnu11 -O2 -Wall -pthread -o "$BIN/thread_per_request" scripts/escape/thread_per_request.c -ldl
g++ -std=c++17 -O2 -Wall -o "$BIN/service_loop" scripts/escape/service_loop.cpp -ldl
MI3=$(bash scripts/mimalloc3.sh)

# 2. allocators: name -> environment of the program
ALLOCS=(glibc)
PEERS=(glibc)
declare -A ENVS=([glibc]="")
for spec in mimalloc-2.0.9:$LIBDIR/libmimalloc.so.2 mimalloc-3:$MI3 \
    jemalloc:$LIBDIR/libjemalloc.so.2 tcmalloc:$LIBDIR/libtcmalloc_minimal.so.4; do
    name=${spec%%:*}; lib=${spec#*:}
    if [[ -f $lib ]]; then ALLOCS+=("$name"); PEERS+=("$name"); ENVS[$name]="LD_PRELOAD=$lib"
    else echo "WARNING: $lib not found; skipping $name (bash scripts/setup.sh installs it)" >&2; fi
done
ALLOCS+=(rz-markers rz-process)
ENVS[rz-markers]="LD_PRELOAD=$SO"
ENVS[rz-process]="LD_PRELOAD=$SO RESIZEALLOC_REGION=process"

PROGS=(thread_per_request service_loop)
[[ -n ${ONLY:-} ]] && read -r -a PROGS <<<"$ONLY"

# 3. interleaved rounds: RAW/<prog>.<alloc>.<round>.{out,err}
for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" "${ALLOCS[@]}"
    for prog in "${PROGS[@]}"; do
        for a in "${ORDER[@]}"; do
            base=$RAW/$prog.$a.$r
            # env -u: markers mode must not inherit a RESIZEALLOC_REGION from the caller
            if ! env -u RESIZEALLOC_REGION ${ENVS[$a]} "$BIN/$prog" >"$base.out" 2>"$base.err"; then
                echo "WARNING: $prog under $a (round $r) failed; repro: ${ENVS[$a]} $BIN/$prog" >&2
            fi
        done
    done
    echo "round $r of $ROUNDS done" >&2
done

# 4. medians -> markdown
elapsed=$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
python3 - "$RAW" "$ROUNDS" "${ALLOCS[*]}" "${PEERS[*]}" "${PROGS[*]}" >"$OUT/results.md" <<'PY'
import os, statistics, sys
raw, rounds = sys.argv[1], int(sys.argv[2])
allocs, peers, progs = sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split()

def run(prog, alloc, r):
    path = os.path.join(raw, f"{prog}.{alloc}.{r}.out")
    try:
        kv = dict(line.split(None, 1) for line in open(path) if " " in line)
    except FileNotFoundError:
        return None
    if not {"checksum", "time_s", "maxrss_kib"} <= kv.keys():
        return None
    return kv["checksum"].strip(), float(kv["time_s"]), int(kv["maxrss_kib"])

bad = []
for prog in progs:
    runs = {(a, r): run(prog, a, r) for a in allocs for r in range(1, rounds + 1)}
    want = next((v[0] for (a, r), v in sorted(runs.items()) if a == "glibc" and v), None)
    for (a, r), v in runs.items():
        if v is None:
            bad.append(f"{prog} under {a}, round {r}: failed (see {raw}/{prog}.{a}.{r}.err)")
        elif v[0] != want:
            bad.append(f"{prog} under {a}, round {r}: checksum {v[0]} != glibc's {want}")
    ok = lambda a, r: runs[a, r] is not None and runs[a, r][0] == want
    print(f"### {prog}\n")
    print("| allocator | median time (s) | vs glibc | vs fastest peer | median peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|")
    for a in allocs:
        rs = [r for r in range(1, rounds + 1) if ok(a, r)]
        if not rs:
            print(f"| {a} | failed | | | |")
            continue
        t = statistics.median(runs[a, r][1] for r in rs)
        rss = statistics.median(runs[a, r][2] for r in rs) / 1024
        g = [runs[a, r][1] / runs["glibc", r][1] for r in rs if ok("glibc", r)]
        f = []
        for r in rs:
            pt = [runs[p, r][1] for p in peers if ok(p, r)]
            if pt:
                f.append(runs[a, r][1] / min(pt))
        fmt = lambda xs: f"{statistics.median(xs):.2f}x" if xs else "-"
        print(f"| {a} | {t:.3f} | {fmt(g)} | {fmt(f)} | {rss:.1f} |")
    print(f"\nchecksum {want}\n")
if bad:
    print("**Runs that failed or differ:**\n")
    for b in bad:
        print(f"- {b}")
    print()
PY
{
    echo "Median of $ROUNDS interleaved round(s); ratios are medians of per-round ratios;" \
        "$(nproc) CPUs; whole run ${elapsed}s."
    echo "Reproduce: \`ROUNDS=$ROUNDS SO=$SO bash scripts/escape.sh\`"
} >>"$OUT/results.md"
cat "$OUT/results.md"
grep -q '^\*\*Runs that failed' "$OUT/results.md" && exit 1
exit 0
