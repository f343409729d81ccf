#!/usr/bin/env bash
# Request-shaped Rust workloads (examples/workloads/common.rs: a serde_json parse, walk and
# serialise; a boxed tree built and dropped; word counts in a HashMap, sorted; CSV records
# parsed and sorted), a region per request, one binary per global allocator: System, the
# mimalloc crate, ResizeAlloc, ResizeAlloc::wrap(MiMalloc), the ideal (a thread-local bump
# pointer that never frees inside a region: the floor) and the sound floor (the leanest sound
# region allocator we know, examples/workloads_sound.rs: what the guarantees alone cost). One
# thread and two, interleaved over ROUNDS rounds; per-round ratios, medians. (bumpalo is no
# global allocator: the arena's own figures beside it are in benches/bumper_loop.rs.)
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
NAMES=(system mimalloc resize resize_mimalloc ideal sound)
cargo build -q --release $(printf -- '--example workloads_%s ' "${NAMES[@]}")
ARGS=()
[[ -n ${QUICK:-} ]] && ARGS+=(--quick)
[[ -n ${ONLY:-} ]] && ARGS+=(--only "$ONLY")
for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" "${NAMES[@]}"
    for a in "${ORDER[@]}"; do
        bin=target/release/examples/workloads_$a
        { "$bin" "${ARGS[@]}"; "$bin" "${ARGS[@]}" --threads 2; } >"$RAW/$a.$r.txt"
    done
    echo "round $r of $ROUNDS done" >&2
done
python3 scripts/ratio_table.py "$RAW" "$ROUNDS" --target resize,resize_mimalloc \
    --peers system,mimalloc --refs ideal,sound --unit "ns per request" "${NAMES[@]}" \
    >"$OUT/results.md"
cat "$OUT/results.md"
