#!/usr/bin/env bash
# The GPU check (scripts/gpu-check.sh) as far as a machine without a GPU can take it, so that a
# machine with one finds nothing to fix but what only a GPU shows. scripts/test.sh runs it;
# scripts/cuda_env.sh installs what it uses (CUDA 13.5 and 13.0, the GPU Python packages).
#   1. every scripts/gpu/*.cu compiles with each toolkit, with warnings as errors (nvcc's and the
#      host compiler's -Wall -Wextra), and links with shared and with static cudart; a program
#      that calls the driver API links against a stub libcuda.so (soname libcuda.so.1, as the
#      toolkit's stub) generated from the driver functions it uses, each answering
#      CUDA_ERROR_STUB_LIBRARY;
#   2. each program built starts and stops at its first device call: a NO_DEVICE line, exit 3;
#   3. scripts/gpu/*.py byte-compile, and each one, run by a Python without its GPU package,
#      prints one line and no traceback;
#   4. a dry run of scripts/gpu-check.sh with CUDA 13.5 (the stub libcuda.so to link with, no
#      libcuda.so.1 to run with), the GPU Python packages and
#      libresizealloc.so (RESIZEALLOC_SO, else target/debug's, else target/release's): it must
#      exit 0 within GPU_DRY_RUN_SECONDS (default 90), and every step of its results file must
#      say "no device" (or, for PyTorch, not installed).
# Output in target/gpu-build (the dry run's results: target/gpu-build/dry-run/gpu-results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/cuda_env.sh
B=target/gpu-build
rm -rf "$B"
mkdir -p "$B"
fails=0
fail() { echo "gpu_build_check: FAILED: $*"; fails=$((fails + 1)); }

# ---- 1 and 2: the CUDA programs, with every toolkit
for rel in 13.5 13.0; do
  T=$PWD/target/cuda/$rel/toolkit
  out=$B/$rel
  mkdir -p "$out/stubs"
  for cu in scripts/gpu/*.cu; do
    name=$(basename "$cu" .cu)
    if ! "$T/bin/nvcc" -O2 -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -c -o "$out/$name.o" "$cu" >"$out/$name.log" 2>&1; then
      cat "$out/$name.log"; fail "CUDA $rel: $cu does not compile without warnings"; continue
    fi
    # The driver API functions the program calls by name (cudart's are cuda*; it reaches the
    # driver through cuGetProcAddress, not by symbol).
    stub=
    syms=$(nm -u "$out/$name.o" | awk '$2 ~ /^cu[A-Z]/ {print $2}' | sort -u)
    libs=()
    if [ -n "$syms" ]; then
      stub=$out/stubs/$name
      mkdir -p "$stub"
      {
        echo "/* Link stub of libcuda.so for $name.cu: the driver functions it calls, each"
        echo "   answering CUDA_ERROR_STUB_LIBRARY (34) as the toolkit's stub does. */"
        for s in $syms; do echo "int $s(void) { return 34; }"; done
      } >"$stub/stub.c"
      cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stub/libcuda.so" "$stub/stub.c"
      ln -sfn libcuda.so "$stub/libcuda.so.1" # to run it: the loader asks for the soname
      libs=(-L"$stub" -lcuda)
    fi
    for rt in shared static; do
      exe=$out/${name}_$rt
      if ! "$T/bin/nvcc" -cudart "$rt" -o "$exe" "$out/$name.o" "${libs[@]}" >>"$out/$name.log" 2>&1; then
        cat "$out/$name.log"; fail "CUDA $rel: $name does not link with $rt cudart"; continue
      fi
      needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
      case "$rt:$needed" in
        shared:*libcudart.so.13*) ;;
        static:*libcudart*) fail "CUDA $rel: ${name}_static needs a shared cudart ($needed)" ;;
        static:*) ;;
        *) fail "CUDA $rel: ${name}_shared does not need libcudart.so.13 ($needed)" ;;
      esac
      if [ -n "$syms" ] && [[ $needed != *libcuda.so.1* ]]; then
        fail "CUDA $rel: ${name}_$rt does not need libcuda.so.1 ($needed)"
      fi
      # It starts (the stub stands in for the missing driver's libcuda.so.1) and stops at its
      # first device call.
      args=()
      [ "$name" = capture_ipc_pressure ] && args=(capture global)
      rc=0
      got=$(LD_LIBRARY_PATH="${stub:+$stub:}$T/lib" timeout 20 "$exe" "${args[@]}" 2>&1) || rc=$?
      if [ $rc -ne 3 ] || [[ $got != NO_DEVICE* ]] || [ "$(echo "$got" | wc -l)" -ne 1 ]; then
        fail "CUDA $rel: ${name}_$rt without a device: exit $rc, not 3 with one NO_DEVICE line: $got"
      fi
    done
  done
  echo "gpu_build_check: CUDA $rel ($("$T/bin/nvcc" --version | sed -n 's/.*release .*, \(V[0-9.]*\).*/\1/p')): built $(ls "$out" | grep -c '_s[ht]a') programs"
done

# ---- 3: the Python scripts, byte-compiled (outside the tree) and run without their packages
PY=target/py/bin/python
[ -x "$PY" ] || PY=python3
for f in scripts/gpu/*.py; do
  PYTHONPYCACHEPREFIX=$PWD/$B/pycache "$PY" -m py_compile "$f" || fail "$f does not byte-compile"
done
LIB=${RESIZEALLOC_SO:-}
for c in target/debug/libresizealloc.so target/release/libresizealloc.so; do
  [ -n "$LIB" ] || { [ -f "$c" ] && LIB=$PWD/$c; }
done
[ -n "$LIB" ] || { echo "gpu_build_check: no libresizealloc.so (cargo build -p resizealloc-preload, or set RESIZEALLOC_SO)"; exit 1; }
for f in scripts/gpu/*.py; do
  [ "$f" = scripts/gpu/gpu_env.py ] && continue
  rc=0
  got=$(RESIZEALLOC_LIB="$LIB" PYTHONDONTWRITEBYTECODE=1 timeout 60 "$PY" "$f" 2>&1) || rc=$?
  if [ $rc -ne 4 ] || [ "$(echo "$got" | wc -l)" -ne 1 ] || [[ $got == *Traceback* ]]; then
    fail "$f without its GPU package: exit $rc, not 4 with one line: $got"
  fi
done
echo "gpu_build_check: scripts/gpu/*.py byte-compile and stop in one line without their packages ($("$PY" --version))"

# ---- 4: the dry run of the GPU check
T=$PWD/target/cuda/13.5/toolkit
stubs=$(find "$PWD/$B/13.5/stubs" -mindepth 1 -maxdepth 1 -type d | tr '\n' ':')
stubs=${stubs%:}
limit=${GPU_DRY_RUN_SECONDS:-90}
start=$(date +%s)
rc=0
# The stubs serve the link only: at run time there is no libcuda.so.1, as on a machine without a
# driver (a stub standing in for it would be a driver that lacks most of its functions).
PATH="$T/bin:$PATH" LIBRARY_PATH="$stubs" LD_LIBRARY_PATH="$T/lib" RESIZEALLOC_SO="$LIB" \
  PYTHON=$PWD/target/cuda/py/bin/python OUT=$B/dry-run timeout $((limit * 2)) \
  bash scripts/gpu-check.sh --dry-run >"$B/dry-run.out" 2>&1 || rc=$?
took=$(($(date +%s) - start))
RES=$B/dry-run/gpu-results.md
if [ $rc -ne 0 ]; then
  cat "$B/dry-run.out"; fail "gpu-check.sh --dry-run exited with $rc"
elif [ "$took" -gt "$limit" ]; then
  fail "gpu-check.sh --dry-run took ${took}s (more than ${limit}s)"
fi
# Every step has its own line, and none says anything but no device (PyTorch: not installed).
steps=$(grep -c '^- step ' "$RES" || true)
bad=$(grep '^- step ' "$RES" | grep -v -e ': no device' -e ': not installed (torch)' || true)
[ "$steps" -ge 20 ] || fail "the dry run's results list $steps steps"
[ -z "$bad" ] || fail "dry-run steps that did not stop at the device: $bad"
echo "gpu_build_check: gpu-check.sh --dry-run: $steps steps, ${took}s, exit $rc ($RES)"

if [ $fails -ne 0 ]; then
  echo "gpu_build_check: $fails FAILED"
  exit 1
fi
echo "gpu_build_check: 0 failed"
