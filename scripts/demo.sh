#!/usr/bin/env bash
# The main job: build the library and show it against plain malloc and mimalloc.
#   1. the Rust demo (ResizeAlloc as #[global_allocator], regions vs System, stats);
#   2. a C program whose iterations are regions, plain malloc, mimalloc and libresizealloc.so:
#      small temporaries, and image frames above glibc's mmap ceiling;
#   3. a Python program whose steps make large temporaries: plain, with ctypes region markers,
#      and unmodified under RESIZEALLOC_REGION=process.
# Parts 2 and 3 (scripts/demo_run.py) print median times and peak RSS side by side and fail
# (non-zero exit) when libresizealloc.so does not load, a run fails or the answers differ.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# --lib builds libresizealloc.so (the preload package's cdylib) too; --examples the Rust demo.
cargo build --release --workspace --lib --examples
LIB="$PWD/target/release/libresizealloc.so"
if [ ! -f "$LIB" ]; then
  echo "demo: FAILED: $LIB was not built" >&2
  exit 1
fi
PY=$(python3 -c 'import sys; print(sys.executable)')
# ld.so only warns when a preload cannot be loaded and runs the program without it: make sure
# the library loads before anything is measured (demo_run.py checks again before each part).
err=$(LD_PRELOAD="$LIB" "$PY" -c 'import ctypes, sys; sys.exit(0 if hasattr(ctypes.CDLL(None), "resize_region_depth") else 3)' 2>&1) || {
  echo "demo: FAILED: $LIB does not load under LD_PRELOAD: $err" >&2
  exit 1
}
if [ -n "$err" ]; then
  echo "demo: FAILED: loading $LIB printed: $err" >&2
  exit 1
fi
echo
echo "== 1. Rust: ResizeAlloc as the global allocator (examples/demo.rs)"
target/release/examples/demo
mkdir -p target/demo
cc -O2 -Wall -o target/demo/demo_app scripts/demo_app.c -ldl
echo
"$PY" scripts/demo_run.py "$LIB" "$PY" target/demo/demo_app
# 4. NumPy through the Python package (python/, installed into target/py by setup.sh), when
#    NumPy is there: plain, region() without preload (NumPy's handler set per block, and kept),
#    preloaded library + region(), mimalloc.
if target/py/bin/python -c 'import numpy, resizealloc' 2>/dev/null; then
  echo
  echo "== 4. NumPy temporaries per step (scripts/bench_numpy.py; us per step and peak RSS MiB, one round)"
  target/py/bin/python scripts/bench_numpy.py --rounds 1 --reps 2 --sizes 1K,64K,8M --lib "$LIB" --no-pure
  echo "  shows: with resizealloc.region() and no LD_PRELOAD, NumPy's temporaries come from the arena"
  echo "         (NEP 49 handler); plain/region is the speed-up over glibc."
fi
