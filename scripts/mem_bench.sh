#!/usr/bin/env bash
# Memory suite: peak RSS and wall time of allocation patterns and real programs under glibc,
# mimalloc, jemalloc, tcmalloc and libresizealloc.so (process mode and markers mode).
#
#   bash scripts/mem_bench.sh [--quick]
#
# Programs (scripts/membench/*.c, one pattern each; see each file's banner): server, loader,
# churn-small, churn-log, threads, lru, phase, calloc, grow, bigslots (large zeroed blocks
# replaced at random), serial-threads (short-lived threads one after another), handoff (mixed
# lifetimes handed between threads), freed-phase (big blocks freed, then sparse small work);
# plus python3 (scripts/membench/py_churn.py),
# sqlite3 (a 200k-row table, an index, aggregates) and xz (-6 round trip of generated text).
# Every program runs under every allocator, interleaved within each round (the starting
# allocator rotates); each figure is the median over ROUNDS rounds.
#
# Peak RSS is ru_maxrss of the program, from wait4 in scripts/membench/runner.c (the runner sets
# LD_PRELOAD for the child only). Wall time is the runner's, process start included.
#
# Environment:
#   ROUNDS=3             rounds (--quick: 1)
#   MEMBENCH_SCALE=1     scale passed to the C programs and the Python script (--quick: 0.25)
#   XZ_MB=8              size of the xz input (--quick: 2); see BENCHMARKS.md for why not 50
#   SQL_ROWS=200000      rows of the sqlite3 table (--quick: 50000)
#   RUN_TIMEOUT=60       seconds one run may take; a run that times out is not repeated in
#                        later rounds and shows as "timeout"
#   MEMBENCH_ONLY="a b"  run only these programs
#   MEMBENCH_QUICK=1     same as --quick
#   BASELINE_SO=path     adds another libresizealloc.so in both modes (rz-*-before columns)
# Writes target/membench/results.md (and raw/ with every run's output).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
QUICK=${MEMBENCH_QUICK:-0}
for arg in "$@"; do
    case $arg in
        --quick) QUICK=1 ;;
        *) echo "usage: $0 [--quick]" >&2; exit 1 ;;
    esac
done
if ((QUICK)); then
    ROUNDS=${ROUNDS:-1}; SCALE=${MEMBENCH_SCALE:-0.25}; XZ_MB=${XZ_MB:-2}; SQL_ROWS=${SQL_ROWS:-50000}
    RUN_TIMEOUT=${RUN_TIMEOUT:-30}
else
    ROUNDS=${ROUNDS:-3}; SCALE=${MEMBENCH_SCALE:-1}; XZ_MB=${XZ_MB:-8}; SQL_ROWS=${SQL_ROWS:-200000}
    RUN_TIMEOUT=${RUN_TIMEOUT:-60}
fi
OUT=target/membench
BIN=$OUT/bin
RAW=$OUT/raw
DATA=$OUT/data
SRC=scripts/membench
SO=$ROOT/target/release/libresizealloc.so
LIBDIR=/usr/lib/x86_64-linux-gnu
START=$(date +%s.%N)
mkdir -p "$BIN" "$RAW" "$DATA"
rm -f "$RAW"/*

# 1. the preload library (cargo is a no-op when it is up to date)
if ! cargo build --release -p resizealloc-preload >"$OUT/build.log" 2>&1; then
    if [[ -f $SO ]]; then
        echo "WARNING: cargo build failed (see $OUT/build.log); measuring the existing $SO" >&2
    else
        cat "$OUT/build.log" >&2; echo "ERROR: cannot build $SO" >&2; exit 1
    fi
fi

# 2. the C programs, the runner, the inputs
for prog in server loader churn threads lru phase calloc grow bigslots serial_threads handoff freed_phase; do
    gcc -std=gnu11 -O2 -Wall -pthread -o "$BIN/$prog" "$SRC/$prog.c" -ldl -lm
done
gcc -O2 -Wall -o "$BIN/runner" "$SRC/runner.c"
gcc -O2 -Wall -o "$BIN/gendata" "$SRC/gendata.c"
PY=$(python3 -c 'import sys; print(sys.executable)') # the real binary, not a pyenv shim
XZ_IN=$DATA/xz-$XZ_MB.txt
[[ -s $XZ_IN ]] || "$BIN/gendata" "$XZ_MB" >"$XZ_IN"
SQL=$DATA/sqlite-$SQL_ROWS.sql
cat >"$SQL" <<EOF
CREATE TABLE t(a INTEGER, b TEXT, c REAL);
BEGIN;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < $SQL_ROWS)
INSERT INTO t SELECT x, printf('%08d-%s', x * 7919 % 100003, hex(x * x)), x * 0.5 FROM n;
COMMIT;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(a), min(b), max(b), total(c) FROM t;
SELECT substr(b, 1, 3) AS k, count(*), sum(a % 10) FROM t GROUP BY k ORDER BY k LIMIT 20;
SELECT b FROM t ORDER BY b DESC LIMIT 5;
SELECT a % 1000 AS g, count(*), avg(c) FROM t GROUP BY g ORDER BY count(*) DESC, g LIMIT 5;
EOF

# 3. allocators: name -> environment of the program
ALLOCS=(glibc)
declare -A ENVS=([glibc]="")
missing=0
for spec in mimalloc:libmimalloc.so.2 jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4; do
    name=${spec%%:*}; lib=$LIBDIR/${spec#*:}
    if [[ -f $lib ]]; then ALLOCS+=("$name"); ENVS[$name]="LD_PRELOAD=$lib"
    else echo "WARNING: $lib not found; skipping $name" >&2; missing=1; fi
done
((missing)) && echo "  install with: bash scripts/setup.sh (or apt-get install -y libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4)" >&2
ALLOCS+=(rz-process rz-markers)
ENVS[rz-process]="LD_PRELOAD=$SO RESIZEALLOC_REGION=process"
ENVS[rz-markers]="LD_PRELOAD=$SO"
if [[ -n ${BASELINE_SO:-} ]]; then # another build of the library, side by side in each round
    ALLOCS+=(rz-process-before rz-markers-before)
    ENVS[rz-process-before]="LD_PRELOAD=$BASELINE_SO RESIZEALLOC_REGION=process"
    ENVS[rz-markers-before]="LD_PRELOAD=$BASELINE_SO"
fi

# 4. programs: name -> command (stdin </dev/null unless named in STDIN)
PROGS=(server loader churn-small churn-log threads lru phase calloc grow bigslots serial-threads handoff
    freed-phase python sqlite3 xz)
declare -A CMD=(
    [server]="$BIN/server $SCALE"
    [loader]="$BIN/loader $SCALE"
    [churn-small]="$BIN/churn $SCALE small"
    [churn-log]="$BIN/churn $SCALE log"
    [threads]="$BIN/threads $SCALE"
    [lru]="$BIN/lru $SCALE"
    [phase]="$BIN/phase $SCALE"
    [calloc]="$BIN/calloc $SCALE"
    [grow]="$BIN/grow $SCALE"
    [bigslots]="$BIN/bigslots $SCALE"
    [serial-threads]="$BIN/serial_threads $SCALE"
    [handoff]="$BIN/handoff $SCALE"
    [freed-phase]="$BIN/freed_phase $SCALE"
    [python]="$PY $SRC/py_churn.py $SCALE"
    [sqlite3]="sqlite3"
    [xz]="sh -c"
)
declare -A STDIN=([sqlite3]="$SQL")
if [[ -n ${MEMBENCH_ONLY:-} ]]; then
    read -r -a PROGS <<<"$MEMBENCH_ONLY"
    for p in "${PROGS[@]}"; do [[ -n ${CMD[$p]:-} ]] || { echo "unknown program $p" >&2; exit 1; }; done
fi
command -v sqlite3 >/dev/null || { echo "ERROR: sqlite3 missing (bash scripts/setup.sh)" >&2; exit 1; }
command -v xz >/dev/null || { echo "ERROR: xz missing (bash scripts/setup.sh)" >&2; exit 1; }

# One run: RAW/<prog>.<alloc>.<round>.{rusage,out,err}. The timeout sits between the runner and
# the program (it runs under the allocator too; it is tiny and waits for the program, so
# ru_maxrss is the program's).
declare -A TIMED_OUT=()
run_one() {
    local prog=$1 alloc=$2 r=$3 base=$RAW/$1.$2.$3 rc=0
    if [[ -n ${TIMED_OUT[$prog.$alloc]:-} ]]; then
        echo "maxrss_kib=0 wall_s=0 status=timeout-skipped" >"$base.rusage"; return
    fi
    local -a env_args cmd
    read -r -a env_args <<<"${ENVS[$alloc]}"
    read -r -a cmd <<<"${CMD[$prog]}"
    if [[ $prog == xz ]]; then
        local z=$RAW/xz.$alloc.$r
        cmd+=("xz -6 -T1 -c '$XZ_IN' >'$z.xz' && xz -d -T1 -c '$z.xz' >'$z.txt'")
    fi
    "$BIN/runner" "$base.rusage" "${env_args[@]}" -- timeout -k 5 "$RUN_TIMEOUT" "${cmd[@]}" \
        <"${STDIN[$prog]:-/dev/null}" >"$base.out" 2>"$base.err" || rc=$?
    if [[ $prog == xz ]]; then # the round trip and the compressed bytes are the output
        local z=$RAW/xz.$alloc.$r
        if [[ -f $z.xz ]]; then echo "compressed $(md5sum <"$z.xz" | cut -d' ' -f1)" >>"$base.out"; fi
        if cmp -s "$XZ_IN" "$z.txt"; then echo "roundtrip identical" >>"$base.out"
        else echo "roundtrip DIFFERENT" >>"$base.out"; fi
        rm -f "$z.xz" "$z.txt"
    fi
    if ((rc == 124 || rc == 137)); then
        TIMED_OUT[$prog.$alloc]=1
        echo "WARNING: $prog under $alloc timed out after ${RUN_TIMEOUT}s (not repeated)" >&2
    elif ((rc != 0)); then
        echo "WARNING: $prog under $alloc (round $r) exited with status $rc; repro:" \
            "${ENVS[$alloc]:+${ENVS[$alloc]} }${CMD[$prog]}${STDIN[$prog]:+ < ${STDIN[$prog]}}  (stderr: $base.err)" >&2
    fi
}

# 5. interleaved rounds
na=${#ALLOCS[@]}
for ((r = 1; r <= ROUNDS; r++)); do
    for prog in "${PROGS[@]}"; do
        echo "round $r/$ROUNDS: $prog ..." >&2
        for ((k = 0; k < na; k++)); do
            run_one "$prog" "${ALLOCS[$(((k + r - 1) % na))]}" "$r"
        done
    done
done

# 6. medians -> markdown
elapsed=$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
python3 "$SRC/report.py" "$RAW" "${ALLOCS[*]}" "${PROGS[*]}" >"$OUT/results.md"
{
    echo
    echo "Median of $ROUNDS interleaved round(s); scale $SCALE, xz input $XZ_MB MB, sqlite3 $SQL_ROWS rows," \
        "timeout ${RUN_TIMEOUT}s per run; $(nproc) CPUs; whole run ${elapsed}s."
    echo "Reproduce: \`ROUNDS=$ROUNDS MEMBENCH_SCALE=$SCALE XZ_MB=$XZ_MB SQL_ROWS=$SQL_ROWS bash scripts/mem_bench.sh\`"
} >>"$OUT/results.md"
cat "$OUT/results.md"
