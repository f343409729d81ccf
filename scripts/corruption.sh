#!/usr/bin/env bash
# The heap-corruption programs (preload/tests/c/corruption/, one wrong use of the heap each)
# under plain glibc, mimalloc, jemalloc, tcmalloc and libresizealloc.so in markers mode (the
# program runs in a region) and in process mode, and its heap-debug build (guards, poison and a
# quarantine: preload/src/debug_heap.rs) in both: which each allocator catches (an abort with a
# message, or a fault), and the totals.
#
#   bash scripts/corruption.sh            the table
#   SO=path/to/libresizealloc.so DEBUG_SO=path/to/its/heap-debug/build bash scripts/corruption.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SO:-}" ]; then
    cargo build --release -q -p resizealloc-preload
    SO="$PWD/target/release/libresizealloc.so"
fi
if [ -z "${DEBUG_SO:-}" ]; then
    CARGO_TARGET_DIR=target/heap-debug cargo build --release -q -p resizealloc-preload --features heap-debug
    DEBUG_SO="$PWD/target/heap-debug/release/libresizealloc.so"
fi
DIR=preload/tests/c/corruption
BIN="$PWD/target/corruption"
mkdir -p "$BIN"
# shellcheck source=scripts/peer_columns.sh
source scripts/peer_columns.sh
peer_columns
COLUMNS_+=("resizealloc markers|LD_PRELOAD=$SO" "resizealloc process|LD_PRELOAD=$SO RESIZEALLOC_REGION=process"
    "heap-debug markers|LD_PRELOAD=$DEBUG_SO" "heap-debug process|LD_PRELOAD=$DEBUG_SO RESIZEALLOC_REGION=process")

# caught (abort) | caught (fault) | caught (value) | no | hang
verdict() {
    local rc=0 out
    # shellcheck disable=SC2086 # $1 is a list of assignments
    out=$(env $1 timeout 10 "$2" 2>/dev/null) || rc=$?
    if [ "$rc" -eq 124 ]; then echo hang
    elif [ "$rc" -eq 134 ]; then echo abort
    elif [ "$rc" -eq 139 ] || [ "$rc" -eq 135 ]; then echo fault
    elif [ "$rc" -ne 0 ]; then echo "exit $rc"
    elif [ "$out" = caught ]; then echo value
    else echo no
    fi
}

declare -A total
header="| program |"; rule="|---|"
for c in "${COLUMNS_[@]}"; do header+=" ${c%%|*} |"; rule+="---|"; total[${c%%|*}]=0; done
echo "$header"; echo "$rule"
n=0
for src in "$DIR"/*.c; do
    name=$(basename "$src" .c)
    cc -O0 -g -w -fno-builtin -pthread "$src" -o "$BIN/$name" -ldl -lstdc++
    row="| $name |"
    for c in "${COLUMNS_[@]}"; do
        v=$(verdict "${c#*|}" "$BIN/$name")
        case $v in abort|fault|value) total[${c%%|*}]=$((total[${c%%|*}] + 1));; esac
        row+=" $v |"
    done
    echo "$row"
    n=$((n + 1))
done
row="| **caught, of $n** |"
for c in "${COLUMNS_[@]}"; do row+=" **${total[${c%%|*}]}** |"; done
echo "$row"
