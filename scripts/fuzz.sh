#!/usr/bin/env bash
# The differential fuzzer (preload/tests/c/fuzz.c): random sequences of the malloc family and
# of region begin/end over 2 to 4 threads, each seed run on plain glibc (the reference) and
# under the release, the check-invariants and the heap-debug builds of libresizealloc.so, in
# markers and in process mode. Every run must check all its blocks and print glibc's summary line.
#
#   bash scripts/fuzz.sh                    seeds from the clock, for FUZZ_SECONDS (default 60)
#   FUZZ_SECONDS=3600 bash scripts/fuzz.sh  longer
#   SEED=1234 bash scripts/fuzz.sh          that seed once in every configuration
#   FUZZ_ROUNDS=, FUZZ_OPS=                 rounds per seed and operations per thread and round
#
# A failure prints the command that reproduces it and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_BUDGET=${FUZZ_SECONDS:-60}
ROUNDS=${FUZZ_ROUNDS:-6}
OPS=${FUZZ_OPS:-20000}

cargo build --release -q -p resizealloc-preload
CARGO_TARGET_DIR=target/invariants cargo build -q -p resizealloc-preload --features check-invariants
CARGO_TARGET_DIR=target/heap-debug cargo build --release -q -p resizealloc-preload --features heap-debug
RELEASE_SO="$PWD/target/release/libresizealloc.so"
INVARIANTS_SO="$PWD/target/invariants/debug/libresizealloc.so"
DEBUG_SO="$PWD/target/heap-debug/release/libresizealloc.so"
EXE="$PWD/target/fuzz"
cc -O1 -g -Wall -fno-builtin -pthread preload/tests/c/fuzz.c -o "$EXE" -ldl

# name | environment
CONFIGS=(
    "release, markers|LD_PRELOAD=$RELEASE_SO"
    "release, process|LD_PRELOAD=$RELEASE_SO RESIZEALLOC_REGION=process"
    "check-invariants, markers|LD_PRELOAD=$INVARIANTS_SO"
    "check-invariants, process|LD_PRELOAD=$INVARIANTS_SO RESIZEALLOC_REGION=process"
    "heap-debug, markers|LD_PRELOAD=$DEBUG_SO"
    "heap-debug, process|LD_PRELOAD=$DEBUG_SO RESIZEALLOC_REGION=process"
)

run_seed() {
    local seed=$1 reference out
    if ! reference=$("$EXE" "$seed" "$ROUNDS" "$OPS"); then
        echo "fuzz: seed $seed fails on plain glibc: the fuzzer itself is wrong"
        exit 1
    fi
    for config in "${CONFIGS[@]}"; do
        local name=${config%%|*} env=${config#*|}
        # shellcheck disable=SC2086 # $env is a list of assignments
        if ! out=$(env $env "$EXE" "$seed" "$ROUNDS" "$OPS" 2>&1) || [ "$out" != "$reference" ]; then
            echo "fuzz: seed $seed, $name: the run differs from glibc's"
            echo "  glibc: $reference"
            echo "  this:  $out"
            echo "reproduce: $env $EXE $seed $ROUNDS $OPS"
            exit 1
        fi
    done
}

if [ -n "${SEED:-}" ]; then
    run_seed "$SEED"
    echo "fuzz: seed $SEED agrees with glibc in ${#CONFIGS[@]} configurations"
    exit 0
fi

seed=$(date +%s)
first=$seed
start=$(date +%s)
while [ $(($(date +%s) - start)) -lt "$SECONDS_BUDGET" ]; do
    run_seed "$seed"
    seed=$((seed + 1))
done
echo "fuzz: seeds $first..$((seed - 1)) agree with glibc in ${#CONFIGS[@]} configurations" \
    "($ROUNDS rounds of $OPS operations per thread each)"
