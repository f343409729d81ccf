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
# libresizealloc.so's tests once more, with the library built with the core crate's
# check-invariants feature (in its own target directory, so that the two builds do not undo
# each other): the arena walk after every operation of its Rust paths also checks what the
# assembly fast paths of malloc and free (preload/src/malloc.rs) left behind.
CARGO_TARGET_DIR=target/invariants cargo build -p resizealloc-preload --features resizealloc/check-invariants
RESIZEALLOC_SO="$PWD/target/invariants/debug/libresizealloc.so" cargo test -p resizealloc-preload
# The API docs build without a broken link (the two crates one at a time: their libraries share
# a name, so their docs share a folder).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p resizealloc
RUSTDOCFLAGS="-D warnings --document-private-items" cargo doc --no-deps -p resizealloc-preload
# The Python package (python/; installed into target/py by setup.sh): its pytest suite, with
# the debug libresizealloc.so built above for the preloaded-mode tests.
target/py/bin/python -m pytest -q python/tests
# Weakly ordered targets: the workspace must build for aarch64 (the reservation's publication
# order, the non-x86 fallbacks of the TLS and malloc entry points). Checked, not run: this
# machine is x86-64.
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
    rustup target add aarch64-unknown-linux-gnu || true
fi
if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
    cargo check --workspace --target aarch64-unknown-linux-gnu
else
    echo "SKIPPED: cargo check --target aarch64-unknown-linux-gnu (the target could not be installed)"
fi
