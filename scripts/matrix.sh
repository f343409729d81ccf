#!/usr/bin/env bash
# The region benchmark matrix (scripts/matrix.c: free orders x sizes x live blocks, a tree, and
# growth by realloc), in C under LD_PRELOAD: glibc, mimalloc, jemalloc, tcmalloc,
# libresizealloc.so, the ideal (scripts/bench_ideal.c, unsound: the floor of any region
# allocator behind malloc) and the sound floor (scripts/bench_sound_floor.c -DHDR=16: the
# leanest sound design we know for frees in any order). Interleaved over ROUNDS rounds; each
# ratio is taken within a round and the table gives the median of the per-round ratios.
#   ROUNDS=5 (default)   QUICK=1 (a tenth of the work per cell)   ONLY=cell,cell,...
#   BASELINE_SO=path     another libresizealloc.so, measured as the column "before"
#   SOUNDMAP=1           adds the sound floor that keeps block states in a byte map instead of
#                        headers (bench_sound_floor.c -DMAP=1) as the column "soundmap"
#   IDEAL_PARTS=1        adds the ideal with a header per block ("ideal+hdr", bench_ideal.c
#                        -DHDR=1) and with the chain of links as well ("ideal+link", -DLINK=1):
#                        what those parts of a sound design cost on their own
# Writes target/matrix/results.md (and prints it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/round_order.sh
ROUNDS=${ROUNDS:-5}
OUT=target/matrix
RAW=$OUT/raw
LIBDIR=/usr/lib/x86_64-linux-gnu
mkdir -p "$OUT" "$RAW"
rm -f "$RAW"/*
cargo build -q --release -p resizealloc-preload
gcc -std=gnu11 -O2 -Wall -o "$OUT/matrix" scripts/matrix.c -ldl -lm
# The ideal gets the library's code alignment (its entry points start on a cache line), so that
# where code lands does not make the floor look slower than it is.
gcc -O2 -shared -fPIC -falign-functions=64 -ftls-model=initial-exec -o "$OUT/libideal.so" \
    scripts/bench_ideal.c -ldl
gcc -O2 -shared -fPIC -falign-functions=64 -DHDR=16 -o "$OUT/libsoundhdr.so" \
    scripts/bench_sound_floor.c -ldl
gcc -O2 -shared -fPIC -falign-functions=64 -DMAP=1 -o "$OUT/libsoundmap.so" \
    scripts/bench_sound_floor.c -ldl
if [[ -n ${IDEAL_PARTS:-} ]]; then
    gcc -O2 -shared -fPIC -falign-functions=64 -ftls-model=initial-exec -DHDR=1 \
        -o "$OUT/libideal_hdr.so" scripts/bench_ideal.c -ldl
    gcc -O2 -shared -fPIC -falign-functions=64 -ftls-model=initial-exec -DHDR=1 -DLINK=1 \
        -o "$OUT/libideal_link.so" scripts/bench_ideal.c -ldl
fi

NAMES=(glibc)
declare -A PRELOAD=([glibc]="")
for spec in mimalloc:libmimalloc.so.2 jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4; do
    name=${spec%%:*}; lib=$LIBDIR/${spec#*:}
    if [[ -f $lib ]]; then NAMES+=("$name"); PRELOAD[$name]=$lib
    else echo "WARNING: $lib not found; skipping $name (bash scripts/setup.sh installs it)" >&2; fi
done
NAMES+=(resizealloc)
PRELOAD[resizealloc]=$ROOT/target/release/libresizealloc.so
if [[ -n ${BASELINE_SO:-} ]]; then NAMES+=(before); PRELOAD[before]=$BASELINE_SO; fi
NAMES+=(ideal sound)
PRELOAD[ideal]=$ROOT/$OUT/libideal.so
PRELOAD[sound]=$ROOT/$OUT/libsoundhdr.so
if [[ -n ${SOUNDMAP:-} ]]; then NAMES+=(soundmap); PRELOAD[soundmap]=$ROOT/$OUT/libsoundmap.so; fi
if [[ -n ${IDEAL_PARTS:-} ]]; then
    NAMES+=(ideal+hdr ideal+link)
    PRELOAD[ideal+hdr]=$ROOT/$OUT/libideal_hdr.so
    PRELOAD[ideal+link]=$ROOT/$OUT/libideal_link.so
fi
ARGS=()
[[ -n ${QUICK:-} ]] && ARGS+=(--quick)
[[ -n ${ONLY:-} ]] && ARGS+=(--only "$ONLY")

for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" "${NAMES[@]}"
    for a in "${ORDER[@]}"; do
        # The sound floor refuses what it does not implement (aborts): its cell is then empty.
        env ${PRELOAD[$a]:+LD_PRELOAD=${PRELOAD[$a]}} "$OUT/matrix" "${ARGS[@]}" \
            >"$RAW/$a.$r.txt" 2>/dev/null || true
    done
    echo "round $r of $ROUNDS done" >&2
done

python3 scripts/ratio_table.py "$RAW" "$ROUNDS" --target resizealloc \
    --peers glibc,mimalloc,jemalloc,tcmalloc --refs "ideal,sound${SOUNDMAP:+,soundmap}${IDEAL_PARTS:+,ideal+hdr,ideal+link}${BASELINE_SO:+,before}" --unit "ns per allocation (an allocation and its free, or a realloc step)" \
    "${NAMES[@]}" >"$OUT/results.md"
cat "$OUT/results.md"
