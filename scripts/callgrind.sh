#!/usr/bin/env bash
# Instruction counts (callgrind): repeatable on a noisy machine. Each figure is
# (total at N - total at 0) / N, so start-up and warm-up cancel out.
#   1. Rust: one 80-byte alloc+free pair through ResizeAlloc in a region, outside, System, and
#      bumpalo (alloc only): examples/hotpath.rs.
#   2. C under LD_PRELOAD: the patterns of scripts/callgrind_ops.c under libresizealloc.so, the
#      ideal interposer (scripts/bench_ideal.c), glibc, for "pair", "lifo64" and "calloc" the
#      sound floor (scripts/bench_sound_floor.c: the leanest sound design), for "outside" the
#      bare forwarder (and RESIZEALLOC_REGION=off; for "markers", "escape", "churn" and
#      "window", process mode too). BASELINE_SO=path adds an older libresizealloc.so as "before".
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind missing: apt-get install valgrind"; exit 1; }
cargo build -q --release --example hotpath
cargo build -q --release -p resizealloc-preload
OUT=target/callgrind
mkdir -p "$OUT"
BIN=target/release/examples/hotpath
count() {
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=/dev/null "$@" 2>&1 | awk '/Collected/ {print $4}'
}
per() { # per N cmd... : instructions per operation
  local n=$1; shift
  local a b
  a=$(count "$@" 0); b=$(count "$@" "$n")
  awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.0f", (b - a) / n }'
}
printf '%-10s %s\n' allocator "instructions per alloc+free pair (bumpalo: alloc only)"
for mode in region outside system bumpalo; do
  a=$(count "$BIN" "$mode" 0); b=$(count "$BIN" "$mode" 200000)
  awk -v a="$a" -v b="$b" -v n=200000 -v m="$mode" 'BEGIN { printf "%-10s %.1f\n", m, (b - a) / n }'
done

OPS=$OUT/callgrind_ops
gcc -std=gnu11 -O2 -Wall -pthread -o "$OPS" scripts/callgrind_ops.c -ldl -lm
gcc -O2 -shared -fPIC -o "$OUT/libideal.so" scripts/bench_ideal.c -ldl
gcc -O2 -shared -fPIC -o "$OUT/libforwarder.so" scripts/bench_forwarder.c -ldl
gcc -O2 -shared -fPIC -o "$OUT/libsoundfloor.so" scripts/bench_sound_floor.c -ldl
SO=$PWD/target/release/libresizealloc.so
echo
echo "C under LD_PRELOAD: instructions per operation (per block for lifo64, mixed, first, remote)"
hdr="| pattern | resizealloc |"; sep="|---|---:|"
[[ -n ${BASELINE_SO:-} ]] && { hdr="$hdr before |"; sep="$sep---:|"; }
echo "$hdr ideal | glibc | other |"; echo "$sep---:|---:|---|"
for pat in pair pair100 lifo64 mixed calloc realloc first remote outside markers escape churn window; do
  n=50000; [[ $pat == mixed ]] && n=12800
  row="| $pat | $(per $n env LD_PRELOAD="$SO" "$OPS" $pat) |"
  [[ -n ${BASELINE_SO:-} ]] && row="$row $(per $n env LD_PRELOAD="$BASELINE_SO" "$OPS" $pat) |"
  row="$row $(per $n env LD_PRELOAD="$PWD/$OUT/libideal.so" "$OPS" $pat) | $(per $n "$OPS" $pat) |"
  if [[ $pat == pair || $pat == lifo64 || $pat == calloc ]]; then
    row="$row sound floor $(per $n env LD_PRELOAD="$PWD/$OUT/libsoundfloor.so" "$OPS" $pat) |"
  elif [[ $pat == markers || $pat == escape || $pat == churn || $pat == window ]]; then
    row="$row process mode $(per $n env LD_PRELOAD="$SO" RESIZEALLOC_REGION=process "$OPS" $pat) |"
  elif [[ $pat == outside ]]; then
    row="$row forwarder $(per $n env LD_PRELOAD="$PWD/$OUT/libforwarder.so" "$OPS" $pat), REGION=off $(per $n env LD_PRELOAD="$SO" RESIZEALLOC_REGION=off "$OPS" $pat) |"
  else
    row="$row |"
  fi
  echo "$row"
done
