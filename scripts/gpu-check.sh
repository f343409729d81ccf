#!/usr/bin/env bash
# GPU check for the device pool, in one call on a machine with an NVIDIA GPU, the CUDA toolkit,
# PyTorch, CuPy and cuda-python, and no cargo: it uses the libresizealloc.so built beforehand
# (`cargo build --release -p resizealloc-preload`, then carry target/release; RESIZEALLOC_SO
# names another build).
#
#   bash scripts/gpu-check.sh            # results in $OUT (or target/gpu)/gpu-results.md
#   bash scripts/gpu-check.sh --dry-run  # the same on a machine without a GPU (see below)
#
# 1. builds scripts/gpu/alloc_bench.cu with nvcc, with shared and with static cudart;
# 2. runs each plainly and under LD_PRELOAD=libresizealloc.so RESIZEALLOC_REGION=process:
#    kernels write and read back pooled memory (the program fails on a wrong word), and the
#    host times (shared cudart: the library's cudaMalloc exports; static cudart: its driver
#    hooks, through cudart's cuGetProcAddress lookups) of cudaMalloc(10)+cudaFree, alloc+free+sync vs a bare sync (10 B, 1 MiB, 64 MiB)
#    and cudaMallocAsync+cudaFreeAsync go side by side;
# 3. a PyTorch training loop: torch's caching allocator, PYTORCH_NO_CUDA_MEMORY_CACHING=1, and
#    that under the library (same final loss required);
# 4. cuda.core DeviceMemoryResource.allocate(10) + sync, with and without the library;
# 5. scripts/gpu/capture_ipc_pressure.cu, plainly and under the library: CUDA graph capture in
#    global and relaxed mode with replays after the pool reused memory, IPC between two
#    processes, cuMemCreate of 60% of the device after the pool cached 60%;
# 6. the plug-in entry points, without LD_PRELOAD: PyTorch through CUDAPluggableAllocator,
#    CuPy through CFunctionAllocator (vs CuPy's pool), cuda.core allocate(10) through a
#    MemoryResource over resize_device_allocate (vs CuPy's cp.empty(10)), a Numba kernel through
#    an external memory manager (vs Numba's own).
# Designed for one call of at most 8 minutes (each step has its own timeout); every part
# reports on its own and a failure does not stop the others. Each program run is a step with
# its own line under "## Steps" in the results: ok, no device (the program's first device call
# found no driver or no device: it exits with 3 and a NO_DEVICE line), not installed (the Python
# package it needs is missing: skipped), or FAILED. The exit status is 1 if a build or a step
# failed; here "no device" is a failure too.
#
# --dry-run: the same steps on a machine without a GPU (scripts/gpu_build_check.sh runs it in
# CI): every build must succeed, and every step runs up to its first device call, where "no
# device" is the expected answer; it takes seconds. The results file has its final form, with
# "no device" in place of the numbers. Anything else (a build error, a traceback, a timeout) is
# a failure, as in the real run.
set -u
cd "$(dirname "$0")/.."
DRY=0
case "${1:-}" in
  "") ;;
  --dry-run) DRY=1 ;;
  *) echo "usage: bash scripts/gpu-check.sh [--dry-run]"; exit 2 ;;
esac
OUTDIR=${OUT:-target/gpu}
W=target/gpu # programs and each step's output
mkdir -p "$OUTDIR" "$W"
LIB=${RESIZEALLOC_SO:-$PWD/target/release/libresizealloc.so}
case "$LIB" in /*) ;; *) LIB=$PWD/$LIB ;; esac
RES=$OUTDIR/gpu-results.md
LOG=$OUTDIR/gpu-check.log
STEPS=$OUTDIR/gpu-steps.txt
: >"$LOG"
: >"$STEPS"
rm -f "$W"/*.out "$W"/*.status
status=0
fail() { echo "FAILED: $*" | tee -a "$LOG"; status=1; }

[ -f "$LIB" ] || { echo "missing $LIB: build it with cargo build --release -p resizealloc-preload and carry target/release"; exit 1; }
# The library is built elsewhere and needs glibc >= 2.34 here; say so plainly if it cannot load.
if ! LD_PRELOAD="$LIB" /bin/true 2>"$OUTDIR/preload-check.txt" || [ -s "$OUTDIR/preload-check.txt" ]; then
  echo "libresizealloc.so does not load on this machine (glibc $(ldd --version | head -1 | awk '{print $NF}')):"
  cat "$OUTDIR/preload-check.txt"
  exit 1
fi
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
CUDA_V=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
{
  if [ $DRY = 1 ]; then
    echo "# GPU check, dry run: $(date -u +%Y-%m-%d) on ${GPU:-no GPU}, CUDA ${CUDA_V:-?}"
    echo
    echo "Every step ran up to its first device call; \"no device\" stands where a GPU gives numbers."
  else
    echo "# GPU check: $(date -u +%Y-%m-%d) on ${GPU:-unknown GPU}, CUDA ${CUDA_V:-?}"
  fi
  echo
} >"$RES"

# step ID TIMEOUT [VAR=value...] COMMAND...: runs one program; its stdout goes to $W/ID.out,
# its outcome to $W/ID.status and a line of $STEPS.
step() {
  local id=$1 secs=$2; shift 2
  local rc=0 outcome
  timeout "$secs" env "$@" >"$W/$id.out" 2>"$W/$id.err" || rc=$?
  cat "$W/$id.err" >>"$LOG"
  if [ $rc -eq 0 ]; then
    outcome="ok"
  elif [ $rc -eq 3 ] && grep -q '^NO_DEVICE' "$W/$id.out"; then
    outcome="no device ($(grep -m1 '^NO_DEVICE' "$W/$id.out" | cut -c11-))"
  elif [ $rc -eq 127 ] && grep -q 'libcuda.so.1: cannot open shared object file' "$W/$id.err"; then
    outcome="no device (no driver: libcuda.so.1 not found)"
  elif [ $rc -eq 4 ]; then
    outcome="not installed ($PKG)"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    outcome="FAILED (timed out after ${secs}s)"
  else
    outcome="FAILED (exit $rc: $( (grep -h -m1 -e '^FAIL' -e 'Error' "$W/$id.out" "$W/$id.err"; tail -n1 "$W/$id.err") | head -1 | cut -c1-200))"
  fi
  echo "$outcome" >"$W/$id.status"
  echo "- step $id: $outcome" >>"$STEPS"
  case "$outcome" in
    ok|"not installed"*) ;;
    "no device"*) [ $DRY = 1 ] || fail "$id: $outcome" ;;
    *) fail "$id: $outcome" ;;
  esac
}
# ok ID: whether step ID ran through.
ok() { [ "$(cat "$W/$1.status" 2>/dev/null)" = ok ]; }
# cell ID AWK-PROGRAM: the value the program prints from step ID's output, or the step's outcome.
cell() {
  if ok "$1"; then
    local v; v=$(awk "$2" "$W/$1.out")
    echo "${v:-n/a}"
  else
    sed 's/ (.*//' "$W/$1.status" 2>/dev/null || echo "not run"
  fi
}
# build NAME NVCC-ARGS...: one program, logged; its own line of $STEPS.
build() {
  local name=$1; shift
  if ! command -v nvcc >/dev/null; then
    echo "- build $name: FAILED (nvcc not found)" >>"$STEPS"; fail "build $name: nvcc not found"; return
  fi
  if nvcc "$@" >"$W/build-$name.log" 2>&1; then
    echo "- build $name: ok" >>"$STEPS"
  else
    echo "- build $name: FAILED (nvcc $*)" >>"$STEPS"; fail "nvcc $*"
  fi
  cat "$W/build-$name.log" >>"$LOG"
}
PY=${PYTHON:-$(command -v python3 || command -v python)}

# ---- 1: the CUDA programs, built side by side
rm -f "$W"/alloc_bench_shared "$W"/alloc_bench_static "$W"/capture_ipc_pressure
build alloc_bench_shared -O2 -cudart shared -o "$W/alloc_bench_shared" scripts/gpu/alloc_bench.cu &
build alloc_bench_static -O2 -cudart static -o "$W/alloc_bench_static" scripts/gpu/alloc_bench.cu &
build capture_ipc_pressure -O2 -o "$W/capture_ipc_pressure" scripts/gpu/capture_ipc_pressure.cu -lcuda &
wait
grep -q ': FAILED' "$STEPS" && status=1

# ---- 2: alloc_bench, shared and static cudart, plain and under the library
for rt in shared static; do
  [ -x "$W/alloc_bench_$rt" ] || continue
  step "alloc_bench_$rt" 60 RESIZEALLOC_UNUSED=1 "$W/alloc_bench_$rt" 20000
  step "alloc_bench_${rt}_pooled" 60 LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process RESIZEALLOC_STATS=1 "$W/alloc_bench_$rt" 20000
done
{
  echo "## cudaMalloc / cudaFree (host time per operation)"
  echo
  echo "| measure | shared cudart | shared + resizealloc | static cudart | static + resizealloc |"
  echo "|---|---:|---:|---:|---:|"
} >>"$RES"
for m in correctness pair_10B bare_sync alloc_free_sync_10B alloc_free_sync_10B_vs_bare alloc_free_sync_1MiB alloc_free_sync_1MiB_vs_bare alloc_free_sync_64MiB alloc_free_sync_64MiB_vs_bare async_pair_4KiB; do
  row="| $m |"
  for id in alloc_bench_shared alloc_bench_shared_pooled alloc_bench_static alloc_bench_static_pooled; do
    row="$row $(cell $id "\$1==\"RESULT\" && \$2==\"$m\" {print \$3\" \"\$4}") |"
  done
  echo "$row" >>"$RES"
done
# The pools' exit line (RESIZEALLOC_STATS=1) of each pooled run: segments, syncs, driver calls.
grep -h "resizealloc: device pools" "$LOG" | sed 's/^/    /' >>"$RES" || true
echo >>"$RES"
echo "Targets: pair <= 100 ns host time; alloc+free+sync <= 1.1 x a bare sync (the pooled columns)." >>"$RES"
echo >>"$RES"

# ---- 3: PyTorch
PKG=torch
step torch_caching 120 "$PY" scripts/gpu/torch_loop.py 300
step torch_no_caching 120 PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$PY" scripts/gpu/torch_loop.py 300
step torch_no_caching_pooled 120 PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process "$PY" scripts/gpu/torch_loop.py 300
step torch_plugin 90 RESIZEALLOC_LIB="$LIB" "$PY" scripts/gpu/torch_plugin.py 300
get() { cell "$1" "\$2==\"$2\" {print \$3}"; }
{
  echo "## PyTorch training loop (300 steps, MLP 1024-2048-2048-10, batch 256)"
  echo
  echo "| allocator | us per step | final loss |"
  echo "|---|---:|---:|"
  echo "| torch caching allocator | $(get torch_caching torch_step) | $(get torch_caching torch_loss) |"
  echo "| PYTORCH_NO_CUDA_MEMORY_CACHING=1 | $(get torch_no_caching torch_step) | $(get torch_no_caching torch_loss) |"
  echo "| same, under libresizealloc.so (process mode) | $(get torch_no_caching_pooled torch_step) | $(get torch_no_caching_pooled torch_loss) |"
  echo "| libresizealloc.so through CUDAPluggableAllocator (no LD_PRELOAD) | $(get torch_plugin torch_step) | $(get torch_plugin torch_loss) |"
  echo
  echo "Targets: the LD_PRELOAD row within 1.3 x the first; the plug-in row within 1.1 x the first."
  echo
} >>"$RES"
if ok torch_no_caching && ok torch_no_caching_pooled; then
  [ "$(get torch_no_caching torch_loss)" = "$(get torch_no_caching_pooled torch_loss)" ] || fail "torch loss differs under the library"
fi
if ok torch_caching && ok torch_plugin; then
  [ "$(get torch_caching torch_loss)" = "$(get torch_plugin torch_loss)" ] || fail "torch loss differs through the plug-in"
fi

# ---- 4: cuda.core
PKG=cuda.core
step cuda_core 60 "$PY" scripts/gpu/cuda_core_alloc.py 2000
step cuda_core_pooled 60 LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process "$PY" scripts/gpu/cuda_core_alloc.py 2000
{
  echo "## cuda.core DeviceMemoryResource.allocate(10) + close + sync"
  echo
  echo "| | ns per iteration |"
  echo "|---|---:|"
  echo "| plain | $(get cuda_core cuda_core_alloc_sync) |"
  echo "| under libresizealloc.so | $(get cuda_core_pooled cuda_core_alloc_sync) |"
  echo
  echo "(cuda.core allocates with cuMemAllocFromPoolAsync, which the library serves unless the pool is IPC-exportable.)"
  echo
} >>"$RES"

# ---- 5: the real driver: capture, IPC, pressure
{
  echo "## Graph capture, IPC, memory pressure (scripts/gpu/capture_ipc_pressure.cu)"
  echo
  echo "| check | plain | under libresizealloc.so (process mode) |"
  echo "|---|---|---|"
} >>"$RES"
results() { cell "$1" '$1=="RESULT" {printf "%s %s %s; ", $2, $3, $4}'; }
i10() { # id, label, args...
  local id=$1 label=$2; shift 2
  if [ -x "$W/capture_ipc_pressure" ]; then
    step "$id" 60 "$W/capture_ipc_pressure" "$@"
    step "${id}_pooled" 60 LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process RESIZEALLOC_STATS=1 "$W/capture_ipc_pressure" "$@"
    grep -h FAIL "$W/$id.out" "$W/${id}_pooled.out" >>"$LOG" || true
  fi
  echo "| $label | $(results "$id") | $(results "${id}_pooled") |" >>"$RES"
}
i10 capture_global "capture, global mode, 200 replays after reuse" capture global
i10 capture_relaxed "capture, relaxed mode (cudaMalloc during it)" capture relaxed
i10 ipc "IPC to a child process" ipc "$PWD/$W/ipc-handle"
i10 pressure "cuMemCreate of 60% after the pool cached 60%" pressure
# IPC outside regions (markers mode, no region): the driver's own allocation is shared.
[ -x "$W/capture_ipc_pressure" ] && step ipc_markers 60 LD_PRELOAD="$LIB" "$W/capture_ipc_pressure" ipc "$PWD/$W/ipc-handle"
echo "| IPC, library loaded, outside regions (the workaround) | | $(results ipc_markers) |" >>"$RES"
echo >>"$RES"

# ---- 6: plug-in entry points (no LD_PRELOAD)
sec() { cell "$1" "\$1==\"RESULT\" && \$2==\"$2\" {print \$3}"; }
PKG=cupy
step cupy 60 "$PY" scripts/gpu/cupy_alloc.py cupy
step cupy_plugin 60 RESIZEALLOC_LIB="$LIB" "$PY" scripts/gpu/cupy_alloc.py resize
PKG=cuda.core
step cuda_core_plugin 60 RESIZEALLOC_LIB="$LIB" "$PY" scripts/gpu/cuda_core_resize.py
PKG=numba-cuda
step numba 90 "$PY" scripts/gpu/numba_kernel.py numba
step numba_plugin 90 RESIZEALLOC_LIB="$LIB" "$PY" scripts/gpu/numba_kernel.py resize
{
  echo "## Plug-in entry points (library loaded with dlopen/ctypes, no LD_PRELOAD)"
  echo
  echo "| loop | framework's own allocator | libresizealloc.so plug-in |"
  echo "|---|---:|---:|"
  echo "| CuPy cp.empty(10) + sync, ns | $(sec cupy cupy_empty10_sync_cupy) | $(sec cupy_plugin cupy_empty10_sync_resize) |"
  echo "| cuda.core allocate(10) + close + sync, ns (own: DeviceMemoryResource; compare with CuPy's) | $(sec cuda_core cuda_core_alloc_sync) | $(sec cuda_core_plugin cuda_core_resize_alloc_sync) |"
  echo "| Numba axpy on a fresh 4 MiB array per step, us | $(sec numba numba_axpy_step_numba) | $(sec numba_plugin numba_axpy_step_resize) |"
  echo
  echo "Target: cuda.core allocate(10) + sync through the plug-in <= 1.1 x CuPy's cp.empty(10) + sync (first row, left)."
  echo
} >>"$RES"

{
  echo "## Steps"
  echo
  cat "$STEPS"
} >>"$RES"
cat "$RES"
exit $status
