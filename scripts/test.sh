#!/usr/bin/env bash
# Runs every test: the core crate (unit, arena, global allocator, property and stress tests)
# and libresizealloc.so (C programs and real programs under LD_PRELOAD).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --workspace --all-targets
cargo test --workspace
