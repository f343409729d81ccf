#!/usr/bin/env bash
# The main job: builds the library and shows it, for each way in, against what that user would
# otherwise use (scripts/demo_run.py has the parts): Rust's #[global_allocator] against System,
# the mimalloc crate and bumpalo; C under LD_PRELOAD against glibc, mimalloc 3 and tcmalloc; an
# unmodified Python program in process mode; NumPy under the Python package's region(). Every
# conclusion it prints is computed from the medians, and its last section lists where the
# library does not win. Fails (non-zero exit) when the library does not load, a run fails or
# the answers differ.
#   DEMO_RUNS=3 (default)   runs of each configuration
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the demo runs: a C compiler, tcmalloc, Python's venv, and the Python package with
# NumPy (not the test suite's programs, peers and CUDA toolkits).
bash scripts/setup.sh --demo
cargo build --release -p resizealloc-preload
cargo build --release -p resizealloc \
  --example workloads_system --example workloads_mimalloc --example workloads_resize --example workloads_bumpalo
LIB="$PWD/target/release/libresizealloc.so"
[ -f "$LIB" ] || { echo "demo: FAILED: $LIB was not built" >&2; exit 1; }
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
mkdir -p target/demo
cc -O2 -Wall -o target/demo/demo_app scripts/demo_app.c -ldl
# The peers under LD_PRELOAD: mimalloc 3 built from the mimalloc crate's sources, and Debian's
# tcmalloc.
MIMALLOC3=$(bash scripts/mimalloc3.sh) TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
  "$PY" scripts/demo_run.py "$LIB" "$PY" target/demo/demo_app target/release/examples target/py/bin/python
