#!/usr/bin/env bash
# Host cost of the CUDA hooks without a GPU: scripts/bench_cuda_host.c against the fake cudart
# and fake driver of the tests, under libresizealloc.so (process mode) and with
# RESIZEALLOC_CUDA=off (the fakes alone, for scale), interleaved over ROUNDS rounds; prints the
# median of each cell in ns per operation. The real driver's context lookup adds its own cost on
# a GPU machine (scripts/gpu-check.sh measures that).
#   ROUNDS=5 ITERS=1000000 bash scripts/bench_cuda_host.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-1000000}
OUT=target/bench-cuda-host
mkdir -p "$OUT"
cargo build --release -p resizealloc-preload >/dev/null 2>&1 || cargo build --release -p resizealloc-preload
SO=$PWD/target/release/libresizealloc.so
C=preload/tests/c/cuda
cc -shared -fPIC -O2 -Wl,-Bsymbolic -Wl,-soname,libcuda.so.1 -o "$OUT/libcuda.so.1" $C/fake_libcuda.c
cc -shared -fPIC -O2 -Wl,-soname,libcudart.so.12 -o "$OUT/libcudart.so.12" $C/fake_libcudart.c -ldl
ln -sf libcuda.so.1 "$OUT/libcuda.so"
ln -sf libcudart.so.12 "$OUT/libcudart.so"
cc -O2 -Wall -o "$OUT/bench_cuda_host" scripts/bench_cuda_host.c -L"$OUT" -Wl,-rpath,"$PWD/$OUT" -lcudart -lcuda -ldl
: >"$OUT/raw"
for r in $(seq "$ROUNDS"); do
  for cfg in pooled off; do
    if [ $cfg = pooled ]; then env=(RESIZEALLOC_REGION=process); else env=(RESIZEALLOC_REGION=process RESIZEALLOC_CUDA=off); fi
    env LD_LIBRARY_PATH="$PWD/$OUT" LD_PRELOAD="$SO" "${env[@]}" "$OUT/bench_cuda_host" "$ITERS" | awk -v c=$cfg '$1=="RESULT" {print c, $2, $3}' >>"$OUT/raw"
  done
done
echo "| ns per operation (median of $ROUNDS) | resizealloc pool | fakes alone (CUDA=off) |"
echo "|---|---:|---:|"
for m in pair_10B alloc_free_sync_10B async_pair_4KiB; do
  med() { awk -v c="$1" -v m="$m" '$1==c && $2==m {print $3}' "$OUT/raw" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  echo "| $m | $(med pooled) | $(med off) |"
done
