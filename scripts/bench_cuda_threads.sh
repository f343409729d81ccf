#!/usr/bin/env bash
# Scaling of the device pool's host path with threads, without a GPU: scripts/bench_cuda_threads.c
# (T threads each doing cudaMalloc(10)+cudaFree pairs) against the fake cudart and fake driver of
# the tests, under libresizealloc.so (process mode) and with RESIZEALLOC_CUDA=off (the fakes
# alone, for scale), over ROUNDS rounds; prints each round's speedup of 2 threads over 1
# (throughput ratio; target >= 1.8) and the medians. Needs a quiet machine with >= 2 cores.
#   ROUNDS=5 ITERS=2000000 bash scripts/bench_cuda_threads.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-2000000}
OUT=target/bench-cuda-threads
mkdir -p "$OUT"
cargo build --release -p resizealloc-preload >/dev/null 2>&1 || cargo build --release -p resizealloc-preload
SO=$PWD/target/release/libresizealloc.so
C=preload/tests/c/cuda
cc -shared -fPIC -O2 -Wl,-Bsymbolic -Wl,-soname,libcuda.so.1 -o "$OUT/libcuda.so.1" $C/fake_libcuda.c -pthread
cc -shared -fPIC -O2 -Wl,-soname,libcudart.so.12 -o "$OUT/libcudart.so.12" $C/fake_libcudart.c -ldl
ln -sf libcuda.so.1 "$OUT/libcuda.so"
ln -sf libcudart.so.12 "$OUT/libcudart.so"
cc -O2 -Wall -pthread -o "$OUT/bench_cuda_threads" scripts/bench_cuda_threads.c -L"$OUT" -Wl,-rpath,"$PWD/$OUT" -lcudart -lcuda -ldl
: >"$OUT/raw"
echo "nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  for cfg in pooled off; do
    if [ $cfg = pooled ]; then env=(RESIZEALLOC_REGION=process); else env=(RESIZEALLOC_REGION=process RESIZEALLOC_CUDA=off); fi
    env LD_LIBRARY_PATH="$PWD/$OUT" LD_PRELOAD="$SO" "${env[@]}" "$OUT/bench_cuda_threads" "$ITERS" 2 | awk -v c=$cfg '$1=="RESULT" {print c, $2, $3, $4}' | tee -a "$OUT/raw"
  done
done
med() { awk -v c="$1" -v k="$2" '$1==c && $2==k {split($4,a,"="); print a[2]}' "$OUT/raw" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ns() { awk -v c="$1" -v k="$2" '$1==c && $2==k {split($3,a,"="); print a[2]}' "$OUT/raw" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "| median of $ROUNDS | ns/pair, 1 thread | ns/pair, 2 threads (per pair, whole process) | speedup 2 vs 1 |"
echo "|---|---:|---:|---:|"
for c in pooled off; do
  echo "| $c | $(ns $c threads=1) | $(ns $c threads=2) | $(med $c threads=2) |"
done
