#!/usr/bin/env bash
# Side-by-side allocator benchmark: glibc, mimalloc, jemalloc, tcmalloc and libresizealloc.so
# run the same binary (scripts/bench_alloc.c), interleaved over ROUNDS rounds, beside four
# references: "ideal" (scripts/bench_ideal.c: a bump pointer behind malloc, unsound on purpose,
# the physical limit of an interposer), "forwarder" (scripts/bench_forwarder.c: a bare
# interposer that only forwards), "sound" (scripts/bench_sound_floor.c: the leanest sound region
# allocator we could write, on the bumper and lifo workloads: what soundness alone costs over the
# ideal), "soundhdr" (the same with a header word per block, so that a free out of order is
# O(1): the leanest sound design we know for the mixed workload, whose frees come in any order)
# and "floor" (the work alone, no allocator). The ratio tables' "sound floor" columns take
# soundhdr for mixed and sound for the others. "off" is
# libresizealloc.so with RESIZEALLOC_REGION=off, measured on the outside workload only.
# Table 1: the median of each figure over rounds. Table 2: each ratio is computed within a round
# (same machine state) and the table gives the median of the per-round ratios. Table 3: the
# ratio of each allocator's best round: on a VM whose per-process speed is bimodal (the same
# binary and library run at two speeds 1.6x apart, from one process to the next, with address
# randomization off too), a per-round ratio pairs the two states at random, and the best round
# of each compares them in the same (fast) state.
# Writes target/bench/results.md and target/bench/chart.png.
#   ROUNDS=5 (default)   BENCH_ARGS="--quick" (passed to bench_alloc)
#   BASELINE_SO=path     an older libresizealloc.so, measured as the extra column "before"
#   SUMMARY_ONLY=1       no runs: the tables and chart again from the last run's target/bench/raw
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-5}
BENCH_ARGS=${BENCH_ARGS:-}
OUT=target/bench
RAW=$OUT/raw
SO=$ROOT/target/release/libresizealloc.so
BIN=$OUT/bench_alloc
LIBDIR=/usr/lib/x86_64-linux-gnu
START=$(date +%s.%N)

if [[ -n ${SUMMARY_ONLY:-} ]]; then
    # The allocators and rounds of the last run, from its raw files (NAME.ROUND.txt), in the
    # order the tables list them.
    ls "$RAW"/*.txt >/dev/null || { echo "ERROR: no raw results in $RAW" >&2; exit 1; }
    NAMES=()
    for a in glibc mimalloc jemalloc tcmalloc resizealloc before ideal sound soundhdr forwarder off floor; do
        [[ -f $RAW/$a.1.txt ]] && NAMES+=("$a")
    done
    ROUNDS=$(ls "$RAW" | sed -n 's/^[a-z]*\.\([0-9]*\)\.txt$/\1/p' | sort -n | tail -1)
    n=${#NAMES[@]}
else
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
declare -A PRELOAD=([glibc]="") EXTRA=() ENVS=()
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
IDEAL=$OUT/libideal.so FWD=$OUT/libforwarder.so SOUND=$OUT/libsoundfloor.so
SOUNDHDR=$OUT/libsoundfloor_hdr.so
gcc -O2 -shared -fPIC -o "$IDEAL" scripts/bench_ideal.c -ldl
gcc -O2 -shared -fPIC -o "$FWD" scripts/bench_forwarder.c -ldl
gcc -O2 -shared -fPIC -o "$SOUND" scripts/bench_sound_floor.c -ldl
gcc -O2 -shared -fPIC -DHDR=16 -o "$SOUNDHDR" scripts/bench_sound_floor.c -ldl
NAMES+=(ideal sound soundhdr forwarder off floor)
PRELOAD[ideal]=$ROOT/$IDEAL PRELOAD[forwarder]=$ROOT/$FWD PRELOAD[off]=$SO PRELOAD[floor]=""
PRELOAD[sound]=$ROOT/$SOUND EXTRA[sound]="--only bumper,lifo"
PRELOAD[soundhdr]=$ROOT/$SOUNDHDR EXTRA[soundhdr]="--only mixed"
ENVS[off]="RESIZEALLOC_REGION=off" EXTRA[off]="--only outside" EXTRA[floor]="--floor"

# 4. interleaved rounds; the starting allocator rotates each round
n=${#NAMES[@]}
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r/$ROUNDS ..." >&2
    for ((k = 0; k < n; k++)); do
        a=${NAMES[$(((k + r - 1) % n))]}
        pre=${PRELOAD[$a]}
        rc=0
        env ${pre:+LD_PRELOAD=$pre} ${ENVS[$a]:-} timeout 120 "$BIN" $BENCH_ARGS ${EXTRA[$a]:-} \
            >"$RAW/$a.$r.txt" 2>"$RAW/$a.$r.err" || rc=$?
        if ((rc != 0)); then
            echo "WARNING: $a round $r exited with status $rc; repro:" \
                "${pre:+LD_PRELOAD=$pre }${ENVS[$a]:-} $ROOT/$BIN $BENCH_ARGS ${EXTRA[$a]:-}  (stderr: $RAW/$a.$r.err)" >&2
        fi
    done
done
fi

# 5. medians and per-round ratios -> markdown tables + chart data
awk -v names="${NAMES[*]}" -v rounds="$ROUNDS" -v chart="$OUT/chart.dat" \
    -v peers="glibc mimalloc jemalloc tcmalloc" '
function median(arr, m,    i, j, t, v) {
    if (m == 0) return ""
    for (i = 1; i <= m; i++) v[i] = arr[i]
    for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
function med_of(wl, a,    r, m, arr) {
    m = 0; for (r = 1; r <= rounds; r++) if ((wl, a, r) in val) arr[++m] = val[wl, a, r]
    return median(arr, m)
}
# Median over rounds of num/den (den: an allocator, or "peer": the fastest of the four peers in
# that round). Times: lower is better; for allocs/s the ratio is inverted so < 1 means faster.
function ratio(wl, num, den,    r, m, arr, d, b, i, x) {
    m = 0
    for (r = 1; r <= rounds; r++) {
        if (!((wl, num, r) in val)) continue
        if (den == "peer") {
            b = ""
            for (i = 1; i <= np; i++) if ((wl, P[i], r) in val) { x = val[wl, P[i], r]; if (b == "" || (higher(wl) ? x > b : x < b)) b = x }
            d = b
        } else d = ((wl, den, r) in val) ? val[wl, den, r] : ""
        if (d == "" || d == 0 || val[wl, num, r] == 0) continue
        arr[++m] = higher(wl) ? d / val[wl, num, r] : val[wl, num, r] / d
    }
    return median(arr, m)
}
function higher(wl) { return wl ~ /^(threads[12]|thread_scaling)$/ }
# The sound floor of a workload: the header variant where frees come in any order.
function floor_of(wl) { return wl == "mixed" ? "soundhdr" : "sound" }
# The best figure of `a` over rounds (lowest time, highest throughput); "peer": the best of the
# best figures of the four peers.
function best(wl, a,    r, b, i, x) {
    if (a == "peer") {
        b = ""
        for (i = 1; i <= np; i++) { x = best(wl, P[i]); if (x != "" && (b == "" || (higher(wl) ? x > b : x < b))) b = x }
        return b
    }
    b = ""
    for (r = 1; r <= rounds; r++) if ((wl, a, r) in val) { x = val[wl, a, r]; if (b == "" || (higher(wl) ? x > b : x < b)) b = x }
    return b
}
function bratio(wl, num, den,    n, d) {
    n = best(wl, num); d = best(wl, den)
    if (n == "" || d == "" || n == 0 || d == 0) return ""
    return higher(wl) ? d / n : n / d
}
# The ratio num / den by the estimator `kind`: "median" of per-round ratios, or of "best" rounds.
function q(kind, wl, num, den) { return kind == "best" ? bratio(wl, num, den) : ratio(wl, num, den) }
# Table 2 (kind "median") or 3 ("best"): the first `nw` workloads of W, with the targets.
function ratio_table(kind, nw,    w, wl, ri, rp, rg, rs, sp, ro, rd, tg, sf) {
    print ""
    if (kind == "best") print "### Ratios of best rounds (each allocator in its fastest round; see the header of scripts/bench.sh)"
    else print "### Ratios: median of per-round ratios (below 1 is faster; for threads, throughput inverted)"
    print ""
    print "| workload | resizealloc / ideal | sound floor / ideal | resizealloc / fastest peer | sound floor / fastest peer | resizealloc / glibc | resizealloc / before | targets |"
    print "|---|---:|---:|---:|---:|---:|---:|---|"
    for (w = 1; w <= nw; w++) {
        wl = W[w]; ri = q(kind, wl, "resizealloc", "ideal"); rp = q(kind, wl, "resizealloc", "peer")
        sf = floor_of(wl)
        rg = q(kind, wl, "resizealloc", "glibc"); rs = q(kind, wl, sf, "ideal"); sp = q(kind, wl, sf, "peer")
        tg = ""
        if (wl ~ /^(bumper|lifo|mixed)$/) tg = "<= 1.10x ideal: " check(ri, 1.10) "; <= 1.00x fastest peer: " check(rp, 1.0)
        if (wl == "mixed") tg = tg "; <= 0.50x fastest peer: " check(rp, 0.5)
        if (wl == "temp8m") tg = "<= 1.00x fastest peer: " check(rp, 1.0) "; <= 1.05x glibc: " check(rg, 1.05)
        if (wl == "copy") tg = "no slower than the fastest peer: " check(rp, 1.0)
        if (wl == "outside") {
            ro = q(kind, wl, "off", "forwarder"); rd = q(kind, wl, "resizealloc", "forwarder")
            tg = "REGION=off / forwarder " fr(ro) " (<= 1.05x: " check(ro, 1.05) "); default mode / forwarder " fr(rd)
        }
        print "| " wl " | " fr(ri) " | " (rs == "" ? "" : fr(rs)) " | " fr(rp) " | " (sp == "" ? "" : fr(sp)) " | " fr(rg) " | " fr(q(kind, wl, "resizealloc", "before")) " | " tg " |"
    }
}
function fmt(x) { if (x == "") return "n/a"; return (x >= 1000) ? sprintf("%.0f", x) : (x >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x)) }
function fr(x) { return x == "" ? "n/a" : sprintf("%.2fx", x) }
function check(got, want) { if (got == "") return "n/a"; return got <= want ? "PASS" : "FAIL" }
FNR == 1 { f = FILENAME; sub(".*/", "", f); n2 = split(f, parts, "."); alloc = parts[1]; rnd = parts[2] }
$1 == "RESULT" { val[$2, alloc, rnd] = $3; unit[$2] = $4 }
END {
    na = split(names, A, " "); np = split(peers, P, " ")
    nw = split("bumper lifo mixed temp8m copy outside threads1 threads2 thread_scaling peak_rss_kib", W, " ")
    print "### Medians over rounds"; print ""
    hdr = "| workload | unit |"; sep = "|---|---|"
    for (i = 1; i <= na; i++) { hdr = hdr " " A[i] " |"; sep = sep "---:|" }
    print hdr; print sep
    for (w = 1; w <= nw; w++) {
        wl = W[w]; div = (wl ~ /^threads[12]$/) ? 1e6 : 1
        u = (div > 1) ? "M allocs/s" : unit[wl]; line = "| " wl " | " u " |"
        for (i = 1; i <= na; i++) { med[A[i]] = med_of(wl, A[i]); x = med[A[i]]; line = line " " fmt(x == "" ? "" : x / div) " |" }
        print line
        if (wl ~ /^(bumper|lifo|mixed|outside|temp8m)$/) {   # chart: ns per allocation
            row = (wl == "temp8m") ? "temp8m(8MiB)" : wl
            for (i = 1; i <= na; i++) {
                if (A[i] == "off" || A[i] == "soundhdr") continue
                x = (A[i] == "sound") ? med[floor_of(wl)] : med[A[i]]   # one "sound floor" bar
                row = row " " (x == "" ? "?" : x * (wl == "temp8m" ? 1000 : 1))
            }
            rows[++nr] = row
        }
    }
    ratio_table("median", 8)
    sc = med_of("thread_scaling", "resizealloc")
    print "| thread_scaling | | | | | | | resizealloc 2 threads / 1 thread " fmt(sc) "x (>= 1.90x: " (sc == "" ? "n/a" : (sc >= 1.9 ? "PASS" : "FAIL")) ") |"
    ratio_table("best", 6)
    sc = best("thread_scaling", "resizealloc"); si = best("thread_scaling", "ideal")
    print "| thread_scaling | | | | | | | best round: resizealloc 2 threads / 1 thread " fmt(sc) "x, ideal " fmt(si) "x (>= 1.90x: " (sc == "" ? "n/a" : (sc >= 1.9 ? "PASS" : "FAIL")) ") |"
    printf "workload" > chart; for (i = 1; i <= na; i++) if (A[i] != "off" && A[i] != "soundhdr") printf " %s", A[i] > chart; print "" > chart
    for (i = 1; i <= nr; i++) print rows[i] > chart
}' "$RAW"/*.txt >"$OUT/results.md"

elapsed=$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
{
    echo
    echo "$ROUNDS interleaved rounds (each figure in a round is the best of 3 in-process reps); $(nproc) CPUs; total ${elapsed}s."
    echo "ns/alloc and us/region: lower is better; allocs/s: higher is better. fastest peer: the best of glibc,"
    echo "mimalloc, jemalloc and tcmalloc in the same round. ideal: bump pointer behind malloc (unsound; the limit)."
    echo "sound floor: the leanest sound region allocator we could write (scripts/bench_sound_floor.c; for mixed, its"
    echo "header variant soundhdr, whose frees out of order are O(1))."
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
plot for [i=2:$(head -1 "$OUT/chart.dat" | wc -w)] '$OUT/chart.dat' using i:xtic(1) title columnheader(i)
EOF
else
    echo "WARNING: gnuplot not found; no chart" >&2
fi
