#!/usr/bin/env bash
# The main job: build the library and show it working against the system allocator.
#   1. the Rust demo (ResizeAlloc as #[global_allocator], regions vs System, stats);
#   2. an unmodified Python program with and without LD_PRELOAD=libresizealloc.so
#      (RESIZEALLOC_REGION=process, RESIZEALLOC_STATS=1);
#   3. a C program with region markers, with and without the library.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --workspace --examples
LIB="$PWD/target/release/libresizealloc.so"
echo
echo "== 1. Rust: ResizeAlloc as the global allocator"
cargo run -q --release --example demo
echo
echo "== 2. Unmodified python3, plain and under LD_PRELOAD with RESIZEALLOC_REGION=process"
PY=$(python3 -c 'import sys; print(sys.executable)')
"$PY" scripts/demo_py.py
LD_PRELOAD="$LIB" RESIZEALLOC_REGION=process RESIZEALLOC_STATS=1 "$PY" scripts/demo_py.py
echo
echo "== 3. A C program whose iterations are regions, plain malloc vs libresizealloc.so"
mkdir -p target/demo
cc -O2 -o target/demo/demo_app scripts/demo_app.c -ldl
target/demo/demo_app
LD_PRELOAD="$LIB" RESIZEALLOC_STATS=1 target/demo/demo_app
