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
# The Rust matrix (examples/workloads/matrix.rs) runs through under every heap of
# scripts/matrix_rust.sh and prints its cells: all 27 under the floors and bumpalo, five under
# the library (its debug build checks the arena after every free, which is slow on 10,000
# blocks).
for a in system mimalloc ideal sound bumpalo resize resize_mimalloc; do
    cells=()
    [[ $a == resize* ]] && cells=(--only random/s128/64,none/big/64,tree/s48/1023,grow/string/256,grow/mixed/64)
    n=$(target/debug/examples/workloads_$a --matrix --quick "${cells[@]}" | grep -c '^RESULT ')
    want=27; [[ $a == resize* ]] && want=5
    [[ $n == "$want" ]] || { echo "workloads_$a --matrix printed $n cells, not $want"; exit 1; }
done
# libresizealloc.so's tests once more, with the library built with check-invariants (in its
# own target directory, so that the builds do not undo each other): the arena walk runs after
# every operation of its Rust paths, and the assembly paths of malloc and free
# (preload/src/entry_x86_64.rs) exit through it too.
CARGO_TARGET_DIR=target/invariants cargo build -p resizealloc-preload --features check-invariants
INVARIANTS_SO="$PWD/target/invariants/debug/libresizealloc.so"
for f in malloc:checked_malloc_exit free:checked_free_exit; do
    # grep reads it all (grep -q would exit at the first match, and pipefail would see awk die
    # of SIGPIPE on a long function).
    objdump -d --no-show-raw-insn "$INVARIANTS_SO" | awk "/<${f%%:*}>:\$/,/^\$/" | grep "${f#*:}" >/dev/null \
        || { echo "the check-invariants build's ${f%%:*} does not exit through ${f#*:}"; exit 1; }
done
RESIZEALLOC_SO="$INVARIANTS_SO" cargo test -p resizealloc-preload
# And a third time with the Rust twins of the assembly paths: the tls-thread-local build keeps
# the thread state in thread_local!, so malloc and free are the Rust ones of preload/src/entry.rs
# and malloc.rs (what every target but x86-64 Linux runs).
CARGO_TARGET_DIR=target/twins cargo build -p resizealloc-preload --features tls-thread-local
TWINS_SO="$PWD/target/twins/debug/libresizealloc.so"
if objdump -d --no-show-raw-insn "$TWINS_SO" | awk '/<malloc>:$/,/^$/' | grep '%fs:' >/dev/null; then
    echo "the tls-thread-local build's malloc is the assembly one"; exit 1
fi
RESIZEALLOC_SO="$TWINS_SO" cargo test -p resizealloc-preload
# The README's benchmark summary quotes only figures that stand in BENCHMARKS.md.
python3 scripts/check_figures.py
# Lints: clippy on every target of both crates, warnings as errors.
cargo clippy --workspace --all-targets -- -D warnings
# The API docs build without a broken link (the two crates one at a time: their libraries share
# a name, so their docs share a folder).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p resizealloc
RUSTDOCFLAGS="-D warnings --document-private-items" cargo doc --no-deps -p resizealloc-preload
# Installed as users install it: the crates through `cargo publish --dry-run` and a new project
# on the packaged crate; the C library through scripts/install.sh, pkg-config and a second build
# under LD_PRELOAD; the Python wheel (built by setup.sh) in a fresh virtualenv without Rust,
# where the package's pytest suite runs against it (with the debug libresizealloc.so built
# above for the preloaded-mode tests).
bash scripts/package_check.sh
# The GPU check as far as a machine without a GPU goes: CUDA programs built, scripts run, a dry run.
RESIZEALLOC_SO="$PWD/target/debug/libresizealloc.so" bash scripts/gpu_build_check.sh
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
RESIZEALLOC_SO=target/debug/libresizealloc.so bash scripts/glibc_tests.sh # glibc's own malloc tests (tests/glibc/README.md)
# The differential fuzzer against glibc, for a minute (FUZZ_SECONDS), under the release and the
# check-invariants builds, in markers and process mode.
bash scripts/fuzz.sh
