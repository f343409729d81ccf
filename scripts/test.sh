#!/usr/bin/env bash
# Runs every test: the core crate (unit, arena, global allocator, property and stress tests)
# and libresizealloc.so (C programs and real programs under LD_PRELOAD).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --workspace --all-targets
# The core crate once more with the full arena walk after every operation.
cargo test -p resizealloc --features check-invariants --tests
cargo test --workspace
