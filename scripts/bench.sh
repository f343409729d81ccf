#!/usr/bin/env bash
# Side-by-side allocator benchmark: glibc, mimalloc, jemalloc, tcmalloc and libresizealloc.so
# run the same binary (scripts/bench_alloc.c), interleaved over ROUNDS rounds; each cell is the
# median over rounds. Writes target/bench/results.md and target/bench/chart.png.
#   ROUNDS=3 (default)   BENCH_ARGS="--quick" (passed to bench_alloc)
#   BASELINE_SO=path     an older libresizealloc.so, measured as the extra column "before"
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-3}
BENCH_ARGS=${BENCH_ARGS:-}
OUT=target/bench
RAW=$OUT/raw
SO=$ROOT/target/release/libresizealloc.so
BIN=$OUT/bench_alloc
LIBDIR=/usr/lib/x86_64-linux-gnu
START=$(date +%s.%N)

mkdir -p "$OUT"
# 1. preload library (cargo is a no-op when it is up to date)
if ! cargo build --release -p resizealloc-preload >"$OUT.build.log" 2>&1; then
    if [[ -f $SO ]]; then
        echo "WARNING: cargo build failed (see $OUT.build.log); benchmarking the existing $SO" >&2
    else
        cat "$OUT.build.log" >&2; echo "ERROR: cannot build $SO" >&2; exit 1
    fi
fi
rm -f "$OUT.build.log"

# 2. benchmark binary
mkdir -p "$OUT" "$RAW"
rm -f "$RAW"/*
if [[ ! -x $BIN || scripts/bench_alloc.c -nt $BIN || preload/include/resizealloc.h -nt $BIN ]]; then
    gcc -std=c11 -O2 -Wall -pthread -o "$BIN" scripts/bench_alloc.c -ldl -lm
fi

# 3. allocators (name=preload path; glibc has none)
NAMES=(glibc)
declare -A PRELOAD=([glibc]="")
missing=0
for spec in mimalloc:libmimalloc.so.2 jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4; do
    name=${spec%%:*}; lib=$LIBDIR/${spec#*:}
    if [[ -f $lib ]]; then NAMES+=("$name"); PRELOAD[$name]=$lib
    else echo "WARNING: $lib not found; skipping $name" >&2; missing=1; fi
done
((missing)) && echo "  install with: apt-get install -y libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4" >&2
NAMES+=(resizealloc); PRELOAD[resizealloc]=$SO
# BASELINE_SO=/path/to/an/older/libresizealloc.so adds it as the column "before", interleaved in
# the same rounds: the way to show that a change did not make the region workloads slower.
if [[ -n ${BASELINE_SO:-} ]]; then NAMES+=(before); PRELOAD[before]=$BASELINE_SO; fi
# "forwarder": a preloaded library that only forwards to glibc (scripts/bench_forwarder.c): what
# any interposer costs. "floor": the same binary with --floor (bump from a static buffer, no
# frees): the work alone.
FWD=$OUT/libforwarder.so
gcc -O2 -shared -fPIC -o "$FWD" scripts/bench_forwarder.c -ldl
NAMES+=(forwarder floor); PRELOAD[forwarder]=$ROOT/$FWD; PRELOAD[floor]=""

# 4. interleaved rounds; the starting allocator rotates each round
n=${#NAMES[@]}
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r/$ROUNDS ..." >&2
    for ((k = 0; k < n; k++)); do
        a=${NAMES[$(((k + r - 1) % n))]}
        pre=${PRELOAD[$a]}
        rc=0
        extra=""; [[ $a == floor ]] && extra=--floor
        env ${pre:+LD_PRELOAD=$pre} timeout 120 "$BIN" $BENCH_ARGS $extra >"$RAW/$a.$r.txt" 2>"$RAW/$a.$r.err" || rc=$?
        if ((rc != 0)); then
            echo "WARNING: $a round $r exited with status $rc; repro:" \
                "${pre:+LD_PRELOAD=$pre }$ROOT/$BIN $BENCH_ARGS  (stderr: $RAW/$a.$r.err)" >&2
        fi
    done
done

# 5. medians -> markdown table + chart data
awk -v names="${NAMES[*]}" -v rawdir="$RAW" -v chart="$OUT/chart.dat" '
function median(key,    m, i, j, t, v) {
    m = cnt[key]; if (m == 0) return ""
    for (i = 1; i <= m; i++) v[i] = vals[key, i]
    for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
function fmt(x) { if (x == "") return "n/a"; return (x >= 1000) ? sprintf("%.0f", x) : (x >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x)) }
function check(got, op, want) { if (got == "") return "n/a"; return ((op == ">=") ? got >= want : got <= want) ? "PASS" : "FAIL" }
FNR == 1 { f = FILENAME; sub(".*/", "", f); alloc = f; sub(/\..*/, "", alloc) }
$1 == "RESULT" { key = $2 SUBSEP alloc; cnt[key]++; vals[key, cnt[key]] = $3; unit[$2] = $4 }
END {
    na = split(names, A, " "); nw = split("bumper lifo mixed temp8m outside threads1 threads2 thread_scaling peak_rss_kib", W, " ")
    hdr = "| workload | unit |"; sep = "|---|---|"
    for (i = 1; i <= na; i++) { hdr = hdr " " A[i] " |"; sep = sep "---:|" }
    print hdr " speedup vs fastest other | resizealloc / glibc | target |"; print sep "---:|---:|---|"
    for (w = 1; w <= nw; w++) {
        wl = W[w]; higher = (wl ~ /^thread/); div = (wl ~ /^threads[12]$/) ? 1e6 : 1
        u = (div > 1) ? "M allocs/s" : unit[wl]; line = "| " wl " | " u " |"; best = ""
        for (i = 1; i <= na; i++) {
            med[A[i]] = median(wl SUBSEP A[i]); x = med[A[i]]
            line = line " " fmt(x == "" ? "" : x / div) " |"
            if (A[i] != "resizealloc" && A[i] != "before" && A[i] != "floor" && A[i] != "forwarder" && x != "" && (best == "" || (higher ? x > best : x < best))) best = x
        }
        rz = med["resizealloc"]; gl = med["glibc"]; sp = ""; rg = ""
        if (rz != "" && best != "" && rz > 0 && wl != "thread_scaling" && wl != "peak_rss_kib") sp = higher ? rz / best : best / rz
        if (rz != "" && gl != "" && gl > 0) rg = rz / gl
        tg = ""
        if (wl == "bumper" || wl == "mixed") tg = ">= 2.00x faster: " check(sp, ">=", 2.0)
        if (wl == "temp8m") tg = "<= 1.05x glibc: " check(rg, "<=", 1.05)
        if (wl == "outside") tg = "<= 1.10x glibc: " check(rg, "<=", 1.10)
        if (wl == "thread_scaling") tg = ">= 1.80x: " check(rz, ">=", 1.8)
        print line " " (sp == "" ? "-" : sprintf("%.2fx", sp)) " | " (rg == "" ? "-" : sprintf("%.2fx", rg)) " | " tg " |"
        if (wl ~ /^(bumper|lifo|mixed|outside|temp8m)$/) {   # chart: ns per allocation
            row = (wl == "temp8m") ? "temp8m(8MiB)" : wl
            for (i = 1; i <= na; i++) row = row " " (med[A[i]] == "" ? "?" : med[A[i]] * (wl == "temp8m" ? 1000 : 1))
            rows[++nr] = row
        }
    }
    printf "workload" > chart; for (i = 1; i <= na; i++) printf " %s", A[i] > chart; print "" > chart
    for (i = 1; i <= nr; i++) print rows[i] > chart
}' "$RAW"/*.txt >"$OUT/results.md"

elapsed=$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
{
    echo
    echo "Median of $ROUNDS interleaved rounds (each figure in a round is the best of 3 in-process reps)."
    echo "ns/alloc and us/region: lower is better; allocs/s: higher is better. $(nproc) CPUs; total ${elapsed}s."
    echo "speedup vs fastest other = fastest other / resizealloc for times, resizealloc / best other for allocs/s."
} >>"$OUT/results.md"
cat "$OUT/results.md"

# 6. chart
if command -v gnuplot >/dev/null; then
    term=png; gnuplot -e 'set terminal' 2>&1 | grep -qw pngcairo && term=pngcairo
    gnuplot <<EOF && echo "chart: $OUT/chart.png" || echo "WARNING: gnuplot failed" >&2
set terminal $term size 1100,600
set output '$OUT/chart.png'
set title 'ns per allocation (median of $ROUNDS rounds; lower is better)'
set datafile missing '?'
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set logscale y
set yrange [1:*]
set ylabel 'ns / allocation (log scale)'
set key top left
set grid ytics
plot for [i=2:$((n + 1))] '$OUT/chart.dat' using i:xtic(1) title columnheader(i)
EOF
else
    echo "WARNING: gnuplot not found; no chart" >&2
fi
