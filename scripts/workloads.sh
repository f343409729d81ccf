#!/usr/bin/env bash
# Request-shaped Rust workloads (examples/workloads/common.rs: a serde_json parse, walk and
# serialise; a boxed tree built and dropped; word counts in a HashMap, sorted; CSV records
# parsed and sorted), a region per request, one binary per global allocator: System, the
# mimalloc crate, ResizeAlloc, ResizeAlloc::wrap(MiMalloc), the ideal (a thread-local bump
# pointer that never frees inside a region: the floor) and the sound floor (the leanest sound
# region allocator we know, examples/workloads_sound.rs: what the guarantees alone cost), and
# jemalloc and tcmalloc (the System binary under LD_PRELOAD of Debian's libjemalloc2 and
# libtcmalloc-minimal4, scripts/setup.sh). The workloads whose blocks escape their region
# (examples/workloads/escape.rs: cache, results, orders, logs) do not run under the ideal and
# the sound floor, which cannot keep such blocks. One thread and two, interleaved over ROUNDS
# rounds; per-round ratios, medians; every run's checksums must equal System's. (bumpalo is
# no global allocator: the arena's own figures beside it are in benches/bumper_loop.rs.)
#   ROUNDS=5 (default)   QUICK=1   ONLY=json,tree,...
# Writes target/workloads/results.md (and prints it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/round_order.sh
ROUNDS=${ROUNDS:-5}
OUT=target/workloads
RAW=$OUT/raw
mkdir -p "$OUT" "$RAW"
rm -f "$RAW"/*
BUILT=(system mimalloc resize resize_mimalloc ideal sound)
cargo build -q --release $(printf -- '--example workloads_%s ' "${BUILT[@]}")
NAMES=("${BUILT[@]}")
declare -A BIN ENVS
for a in "${BUILT[@]}"; do BIN[$a]=workloads_$a; ENVS[$a]=""; done
LIBDIR=/usr/lib/x86_64-linux-gnu
for spec in jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4; do
    lib=$LIBDIR/${spec#*:}
    if [[ -f $lib ]]; then NAMES+=("${spec%%:*}"); BIN[${spec%%:*}]=workloads_system; ENVS[${spec%%:*}]="LD_PRELOAD=$lib"
    else echo "WARNING: $lib not found; skipping ${spec%%:*} (bash scripts/setup.sh installs it)" >&2; fi
done
ARGS=()
[[ -n ${QUICK:-} ]] && ARGS+=(--quick)
[[ -n ${ONLY:-} ]] && ARGS+=(--only "$ONLY")
for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" "${NAMES[@]}"
    for a in "${ORDER[@]}"; do
        bin=target/release/examples/${BIN[$a]}
        { env ${ENVS[$a]} "$bin" "${ARGS[@]}"; env ${ENVS[$a]} "$bin" "${ARGS[@]}" --threads 2; } >"$RAW/$a.$r.txt"
    done
    echo "round $r of $ROUNDS done" >&2
done
# The same work everywhere: every checksum equals System's for the same cell.
for f in "$RAW"/*.txt; do
    awk 'FNR == NR { c[$2] = $NF; next } /^RESULT/ && ($2 in c) && c[$2] != $NF { bad = 1 } END { exit bad }' \
        "$RAW/system.1.txt" "$f" || { echo "ERROR: $f: checksums differ from System's" >&2; exit 1; }
done
python3 scripts/ratio_table.py "$RAW" "$ROUNDS" --target resize,resize_mimalloc \
    --peers system,mimalloc,jemalloc,tcmalloc --refs system,ideal,sound --unit "ns per request" "${NAMES[@]}" \
    >"$OUT/results.md"
cat "$OUT/results.md"
