#!/usr/bin/env bash
# The region benchmark matrix in Rust (examples/workloads/matrix.rs: the cells of
# scripts/matrix.c, the same sizes, orders and seeds, through a Rust heap): one binary per
# global allocator, as scripts/workloads.sh runs them (System, the mimalloc crate, ResizeAlloc,
# ResizeAlloc::wrap(MiMalloc), the ideal GlobalAlloc and the sound floor GlobalAlloc), with
# `--matrix`, and bumpalo's explicit arena beside them (examples/workloads_bumpalo.rs: no
# frees, a reset per region). Interleaved over ROUNDS rounds; each ratio is taken within a
# round and the table gives the median of the per-round ratios.
#   ROUNDS=5 (default)   QUICK=1 (a tenth of the work per cell)   ONLY=cell,cell,...
# Writes target/matrix_rust/results.md (and prints it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/round_order.sh
ROUNDS=${ROUNDS:-5}
OUT=target/matrix_rust
RAW=$OUT/raw
mkdir -p "$OUT" "$RAW"
rm -f "$RAW"/*
NAMES=(system mimalloc resize resize_mimalloc ideal sound bumpalo)
cargo build -q --release $(printf -- '--example workloads_%s ' "${NAMES[@]}")
ARGS=(--matrix)
[[ -n ${QUICK:-} ]] && ARGS+=(--quick)
[[ -n ${ONLY:-} ]] && ARGS+=(--only "$ONLY")
for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" "${NAMES[@]}"
    for a in "${ORDER[@]}"; do
        target/release/examples/workloads_$a "${ARGS[@]}" >"$RAW/$a.$r.txt"
    done
    echo "round $r of $ROUNDS done" >&2
done
python3 scripts/ratio_table.py "$RAW" "$ROUNDS" --target resize,resize_mimalloc \
    --peers system,mimalloc --refs ideal,sound,bumpalo \
    --unit "ns per allocation (an allocation and its free, or a growth step)" "${NAMES[@]}" \
    >"$OUT/results.md"
cat "$OUT/results.md"
