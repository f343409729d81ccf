#!/usr/bin/env bash
# GPU check for the device pool, in one call on a machine with an NVIDIA GPU, the CUDA toolkit,
# PyTorch, CuPy and cuda-python, and no cargo: it uses the libresizealloc.so built beforehand
# (`cargo build --release -p resizealloc-preload`, then carry target/release).
#
#   bash scripts/gpu-check.sh            # results in $OUT (or target/gpu)/gpu-results.md
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
# reports on its own and a failure does not stop the others (the exit status is 1 if any part
# failed).
set -u
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-target/gpu}
mkdir -p "$OUTDIR" target/gpu
LIB=$PWD/target/release/libresizealloc.so
RES=$OUTDIR/gpu-results.md
LOG=$OUTDIR/gpu-check.log
: >"$LOG"
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
  echo "# GPU check: $(date -u +%Y-%m-%d) on ${GPU:-unknown GPU}, CUDA ${CUDA_V:-?}"
  echo
} >"$RES"

# ---- 1+2: the CUDA program, shared and static cudart, plain and under the library
for rt in shared static; do
  if ! nvcc -O2 -cudart $rt -o target/gpu/alloc_bench_$rt scripts/gpu/alloc_bench.cu >>"$LOG" 2>&1; then
    fail "nvcc -cudart $rt"; continue
  fi
done
run_bench() { # name, env...
  local name=$1; shift
  timeout 60 env "$@" "target/gpu/alloc_bench_$name" 20000 >"target/gpu/out.$name.$RUN" 2>>"$LOG" || fail "alloc_bench $name ($RUN)"
}
{
  echo "## cudaMalloc / cudaFree (host time per operation)"
  echo
  echo "| measure | shared cudart | shared + resizealloc | static cudart | static + resizealloc |"
  echo "|---|---:|---:|---:|---:|"
} >>"$RES"
for rt in shared static; do
  [ -x target/gpu/alloc_bench_$rt ] || continue
  RUN=plain run_bench $rt RESIZEALLOC_UNUSED=1
  RUN=pooled run_bench $rt LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process RESIZEALLOC_STATS=1
done
for m in correctness pair_10B bare_sync alloc_free_sync_10B alloc_free_sync_10B_vs_bare alloc_free_sync_1MiB alloc_free_sync_1MiB_vs_bare alloc_free_sync_64MiB alloc_free_sync_64MiB_vs_bare async_pair_4KiB; do
  row="| $m |"
  for f in shared.plain shared.pooled static.plain static.pooled; do
    v=$(awk -v m="$m" '$1=="RESULT" && $2==m {print $3" "$4}' "target/gpu/out.$f" 2>/dev/null)
    row="$row ${v:-n/a} |"
  done
  echo "$row" >>"$RES"
done
# The pools' exit line (RESIZEALLOC_STATS=1) of each pooled run: segments, syncs, driver calls.
grep -h "resizealloc: device pools" "$LOG" | sed 's/^/    /' >>"$RES" || true
echo >>"$RES"
echo "Targets: pair <= 100 ns host time; alloc+free+sync <= 1.1 x a bare sync (the pooled columns)." >>"$RES"
echo >>"$RES"

# ---- 3: PyTorch
PY=$(command -v python3 || command -v python)
if "$PY" -c "import torch; assert torch.cuda.is_available()" >>"$LOG" 2>&1; then
  t_cache=$(timeout 120 "$PY" scripts/gpu/torch_loop.py 300 2>>"$LOG") || fail "torch caching"
  t_nocache=$(PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 120 "$PY" scripts/gpu/torch_loop.py 300 2>>"$LOG") || fail "torch no caching"
  t_pool=$(PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process timeout 120 "$PY" scripts/gpu/torch_loop.py 300 2>>"$LOG") || fail "torch under resizealloc"
  t_plugin=$(RESIZEALLOC_LIB="$LIB" timeout 90 "$PY" scripts/gpu/torch_plugin.py 300 2>>"$LOG") || fail "torch through CUDAPluggableAllocator"
  get() { echo "$1" | awk -v k="$2" '$2==k {print $3}'; }
  {
    echo "## PyTorch training loop (300 steps, MLP 1024-2048-2048-10, batch 256)"
    echo
    echo "| allocator | us per step | final loss |"
    echo "|---|---:|---:|"
    echo "| torch caching allocator | $(get "$t_cache" torch_step) | $(get "$t_cache" torch_loss) |"
    echo "| PYTORCH_NO_CUDA_MEMORY_CACHING=1 | $(get "$t_nocache" torch_step) | $(get "$t_nocache" torch_loss) |"
    echo "| same, under libresizealloc.so (process mode) | $(get "$t_pool" torch_step) | $(get "$t_pool" torch_loss) |"
    echo "| libresizealloc.so through CUDAPluggableAllocator (no LD_PRELOAD) | $(get "$t_plugin" torch_step) | $(get "$t_plugin" torch_loss) |"
    echo
    echo "Targets: the LD_PRELOAD row within 1.3 x the first; the plug-in row within 1.1 x the first."
    echo
  } >>"$RES"
  [ "$(get "$t_nocache" torch_loss)" = "$(get "$t_pool" torch_loss)" ] || fail "torch loss differs under the library"
  [ "$(get "$t_cache" torch_loss)" = "$(get "$t_plugin" torch_loss)" ] || fail "torch loss differs through the plug-in"
else
  echo "PyTorch with CUDA not available: skipped" >>"$RES"
fi

# ---- 4: cuda.core
if "$PY" -c "import cuda.core" >>"$LOG" 2>&1; then
  c_plain=$(timeout 60 "$PY" scripts/gpu/cuda_core_alloc.py 2000 2>>"$LOG") || fail "cuda.core plain"
  c_pool=$(LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process timeout 60 "$PY" scripts/gpu/cuda_core_alloc.py 2000 2>>"$LOG") || fail "cuda.core under resizealloc"
  {
    echo "## cuda.core DeviceMemoryResource.allocate(10) + close + sync"
    echo
    echo "| | ns per iteration |"
    echo "|---|---:|"
    echo "| plain | $(echo "$c_plain" | awk '$2=="cuda_core_alloc_sync" {print $3}') |"
    echo "| under libresizealloc.so | $(echo "$c_pool" | awk '$2=="cuda_core_alloc_sync" {print $3}') |"
    echo
    echo "(cuda.core allocates with cuMemAllocFromPoolAsync, which the library serves unless the pool is IPC-exportable.)"
  } >>"$RES"
else
  echo "cuda.core not available: skipped" >>"$RES"
fi

# ---- 5: the real driver: capture, IPC, pressure
if nvcc -O2 -o target/gpu/capture_ipc_pressure scripts/gpu/capture_ipc_pressure.cu -lcuda >>"$LOG" 2>&1; then
  {
    echo "## Graph capture, IPC, memory pressure (scripts/gpu/capture_ipc_pressure.cu)"
    echo
    echo "| check | plain | under libresizealloc.so (process mode) |"
    echo "|---|---|---|"
  } >>"$RES"
  i10() { # label, args...
    local label=$1; shift
    local plain pooled
    plain=$(timeout 60 target/gpu/capture_ipc_pressure "$@" 2>>"$LOG") || fail "capture_ipc_pressure $* (plain)"
    pooled=$(LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process RESIZEALLOC_STATS=1 timeout 60 target/gpu/capture_ipc_pressure "$@" 2>>"$LOG") || fail "capture_ipc_pressure $* (under the library)"
    echo "$plain $pooled" | grep -h FAIL >>"$LOG" || true
    echo "| $label | $(echo "$plain" | awk '$1=="RESULT" {printf "%s %s %s; ", $2, $3, $4}') | $(echo "$pooled" | awk '$1=="RESULT" {printf "%s %s %s; ", $2, $3, $4}') |" >>"$RES"
  }
  i10 "capture, global mode, 200 replays after reuse" capture global
  i10 "capture, relaxed mode (cudaMalloc during it)" capture relaxed
  i10 "IPC to a child process" ipc "$PWD/target/gpu/ipc-handle"
  i10 "cuMemCreate of 60% after the pool cached 60%" pressure
  # IPC outside regions (markers mode, no region): the driver's own allocation is shared.
  ipc_markers=$(LD_PRELOAD="$LIB" timeout 60 target/gpu/capture_ipc_pressure ipc "$PWD/target/gpu/ipc-handle" 2>>"$LOG") || fail "capture_ipc_pressure ipc (markers mode)"
  echo "| IPC, library loaded, outside regions (the workaround) | | $(echo "$ipc_markers" | awk '$1=="RESULT" {printf "%s %s %s; ", $2, $3, $4}') |" >>"$RES"
  echo >>"$RES"
else
  fail "nvcc capture_ipc_pressure.cu"
fi

# ---- 6: plug-in entry points (no LD_PRELOAD)
sec() { echo "$1" | awk -v k="$2" '$1=="RESULT" && $2==k {print $3}'; }
if "$PY" -c "import cupy" >>"$LOG" 2>&1; then
  c_cupy=$(timeout 60 "$PY" scripts/gpu/cupy_alloc.py cupy 2>>"$LOG") || fail "cupy (own pool)"
  c_resize=$(RESIZEALLOC_LIB="$LIB" timeout 60 "$PY" scripts/gpu/cupy_alloc.py resize 2>>"$LOG") || fail "cupy through CFunctionAllocator"
else
  echo "CuPy not available: skipped" >>"$RES"
fi
if "$PY" -c "import cuda.core" >>"$LOG" 2>&1; then
  c_core=$(RESIZEALLOC_LIB="$LIB" timeout 60 "$PY" scripts/gpu/cuda_core_resize.py 2>>"$LOG") || fail "cuda.core through resize_device_allocate"
fi
if "$PY" -c "import numba.cuda" >>"$LOG" 2>&1; then
  n_own=$(timeout 90 "$PY" scripts/gpu/numba_kernel.py numba 2>>"$LOG") || fail "numba (own allocator)"
  n_resize=$(RESIZEALLOC_LIB="$LIB" timeout 90 "$PY" scripts/gpu/numba_kernel.py resize 2>>"$LOG") || fail "numba through the EMM plugin"
else
  echo "Numba not available: skipped" >>"$RES"
fi
{
  echo "## Plug-in entry points (library loaded with dlopen/ctypes, no LD_PRELOAD)"
  echo
  echo "| loop | framework's own allocator | libresizealloc.so plug-in |"
  echo "|---|---:|---:|"
  echo "| CuPy cp.empty(10) + sync, ns | $(sec "${c_cupy:-}" cupy_empty10_sync_cupy) | $(sec "${c_resize:-}" cupy_empty10_sync_resize) |"
  echo "| cuda.core allocate(10) + close + sync, ns (own: DeviceMemoryResource; compare with CuPy's) | $(sec "${c_plain:-}" cuda_core_alloc_sync) | $(sec "${c_core:-}" cuda_core_resize_alloc_sync) |"
  echo "| Numba axpy on a fresh 4 MiB array per step, us | $(sec "${n_own:-}" numba_axpy_step_numba) | $(sec "${n_resize:-}" numba_axpy_step_resize) |"
  echo
  echo "Target: cuda.core allocate(10) + sync through the plug-in <= 1.1 x CuPy's cp.empty(10) + sync (first row, left)."
  echo
} >>"$RES"

cat "$RES"
exit $status
