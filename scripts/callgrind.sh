#!/usr/bin/env bash
# Instructions per alloc+free pair (80 bytes), counted by callgrind: repeatable on a noisy
# machine. Each figure is (total at N pairs - total at 0 pairs) / N, so start-up cancels out.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind missing: apt-get install valgrind"; exit 1; }
cargo build -q --release --example hotpath
BIN=target/release/examples/hotpath
N=200000
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$1" "$2" 2>&1 | awk '/Collected/ {print $4}'
}
printf '%-10s %s\n' allocator "instructions per alloc+free pair (bumpalo: alloc only)"
for mode in region outside system bumpalo; do
  a=$(count "$mode" 0); b=$(count "$mode" "$N")
  awk -v a="$a" -v b="$b" -v n="$N" -v m="$mode" 'BEGIN { printf "%-10s %.1f\n", m, (b - a) / n }'
done
