#!/usr/bin/env bash
# mimalloc-bench's security programs (tests/security/, vendored unedited: 37 in C, 5 in C++, one
# misuse of the heap each) built at several allocation sizes, under plain glibc, mimalloc,
# jemalloc, tcmalloc and libresizealloc.so in markers mode and in process mode: which each
# allocator catches, per size, as Markdown tables (one per size, then the totals).
#
#   SO=path/to/libresizealloc.so bash scripts/security.sh
#   bash scripts/security.sh              builds the library first (cargo)
#   SIZES="16 128 4096"                    the sizes (-DALLOCATION_SIZE=...), these by default
#   DEBUG_SO=path/to/its/heap-debug/build  adds the heap-debug build's two columns
#   WARMED=1                               adds "resizealloc process, warmed" (below)
#   TIMEOUT=5                              seconds per run (bench.sh gives 1; this leaves room
#                                          for a loaded machine)
#
# Builds: as mimalloc-bench's bench/security/CMakeLists.txt (a CMake Release build: -O3
# -DNDEBUG), C with -fno-inline and the other flags below, C++ with -std=c++17
# -fsized-deallocation. mimalloc-bench builds its C programs at 8, 4096 and 256 KiB and its C++
# programs at 4096 only; here every program is built at each size of SIZES (three of the C++
# programs do not read the size).
#
# Markers mode: the programs have no region markers, so scripts/region_at_start.c, preloaded
# beside the library, begins a region on the main thread before main (never ended), as if main
# began with resize_region_begin(). Without it the library would pass every allocation through
# to glibc and the column would repeat glibc's.
#
# Process mode serves a thread's first small request (up to 1 KiB) from glibc and its later
# ones from the small-block heap (so when this was written; the two process columns below differ
# at 16 and 128 bytes while it holds). Each program allocates one block, so at those sizes its
# misuse meets glibc's checks, not the library's. The "process, warmed" column (WARMED=1)
# preloads scripts/warm_at_start.c, which allocates and frees one small block before main: the
# program's blocks then come from the library. It is a diagnosis, not a count of process mode.
#
# Judged as mimalloc-bench's bench.sh judges them (stdout read, stderr dropped): a program the
# allocator does not catch prints NOT_CAUGHT. Caught: the program ends without printing it,
# killed by a signal (abort, segv, ...), with a non-zero exit status (read_zero_size* exit 1
# when malloc(0) gives NULL), or with status 0 (`value`: its own test found what it wanted, a
# NULL for an impossible size, a fresh address, zeroed memory). Not caught: `no` (printed, exit
# 0), `late crash` / `late timeout` (printed, then died or hung: bench.sh's "[late crash]" and
# "[late timeout]"). `timeout` (hung without printing it; bench.sh's "[timeout]") is not counted
# as caught either.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SO:-}" ]; then
    cargo build --release -q -p resizealloc-preload
    SO="$PWD/target/release/libresizealloc.so"
fi
SIZES=${SIZES:-16 128 4096}
TIMEOUT=${TIMEOUT:-5}
SRC=tests/security
OUT_DIR="$PWD/target/security"
mkdir -p "$OUT_DIR"
ulimit -c 0

# What mimalloc-bench's CMake gives each program (CMAKE_C_FLAGS_RELEASE, bench/CMakeLists.txt's
# warnings, bench/security/CMakeLists.txt's options).
CFLAGS_MB=(-O3 -DNDEBUG -w -Wno-free-nonheap-object -fno-inline -fno-builtin-inline
    -fno-inline-small-functions -fno-ipa-pure-const)
CXXFLAGS_MB=(-O3 -DNDEBUG -w -std=c++17 -fsized-deallocation)
STAMP="$OUT_DIR/flags"
flags="$(cc --version | head -1) | $(c++ --version | head -1) | ${CFLAGS_MB[*]} | ${CXXFLAGS_MB[*]}"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$flags" ]; then echo "$flags" >"$STAMP"; fi

for shim in region_at_start warm_at_start; do
    if ! [ "$OUT_DIR/$shim.so" -nt "scripts/$shim.c" ]; then
        cc -O2 -shared -fPIC "scripts/$shim.c" -o "$OUT_DIR/$shim.so"
    fi
done
SHIM="$OUT_DIR/region_at_start.so"

# Each program, at each size: target/security/<size>/<name> (rebuilt when its source, the
# common header or the flags changed).
PROGRAMS=()
for src in "$SRC"/*.c "$SRC"/*.cc; do PROGRAMS+=("$(basename "$src")"); done
for size in $SIZES; do
    mkdir -p "$OUT_DIR/$size"
    for file in "${PROGRAMS[@]}"; do
        bin="$OUT_DIR/$size/${file%.*}"
        if [ "$bin" -nt "$SRC/$file" ] && [ "$bin" -nt "$SRC/common.h" ] && [ "$bin" -nt "$STAMP" ]; then
            continue
        fi
        case $file in
            *.c) cc "${CFLAGS_MB[@]}" -DALLOCATION_SIZE="$size" "$SRC/$file" -o "$bin" ;;
            *.cc) c++ "${CXXFLAGS_MB[@]}" -DALLOCATION_SIZE="$size" "$SRC/$file" -o "$bin" ;;
        esac
    done
done

# shellcheck source=scripts/peer_columns.sh
source scripts/peer_columns.sh
peer_columns
[[ -f $SO ]] || { echo "security.sh: $SO not found" >&2; exit 1; }
COLUMNS_+=("resizealloc markers|LD_PRELOAD=$SHIM:$SO" "resizealloc process|LD_PRELOAD=$SO RESIZEALLOC_REGION=process")
if [ "${WARMED:-0}" = 1 ]; then
    COLUMNS_+=("resizealloc process, warmed|LD_PRELOAD=$OUT_DIR/warm_at_start.so:$SO RESIZEALLOC_REGION=process")
fi
if [ -n "${DEBUG_SO:-}" ]; then
    [[ -f $DEBUG_SO ]] || { echo "security.sh: $DEBUG_SO not found" >&2; exit 1; }
    COLUMNS_+=("heap-debug markers|LD_PRELOAD=$SHIM:$DEBUG_SO" "heap-debug process|LD_PRELOAD=$DEBUG_SO RESIZEALLOC_REGION=process")
fi

# The markers column must run in a region: the library's exit summary counts the program's
# allocations as region allocations (malloc_reuse allocates twice and exits normally).
first_size=${SIZES%% *}
summary=$(env LD_PRELOAD="$SHIM:$SO" RESIZEALLOC_STATS=1 "$OUT_DIR/$first_size/malloc_reuse" 2>&1 >/dev/null || true)
if ! grep -Eq '^resizealloc: [1-9][0-9]* region allocations' <<<"$summary"; then
    echo "security.sh: the markers column does not run in a region; the library said:" >&2
    echo "$summary" >&2
    exit 1
fi

RUN_OUT=$(mktemp)
trap 'rm -f "$RUN_OUT"' EXIT
# One run of $2 under the assignments $1: the cell of the table.
verdict() {
    local rc=0
    # shellcheck disable=SC2086 # $1 is a list of assignments
    env $1 LIBC_FATAL_STDERR_=1 timeout -k 1 "$TIMEOUT" "$2" >"$RUN_OUT" 2>/dev/null </dev/null || rc=$?
    if grep -aq NOT_CAUGHT "$RUN_OUT"; then
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "late timeout"
        elif [ "$rc" -ne 0 ]; then echo "late crash"
        else echo no
        fi
        return
    fi
    case $rc in
        0) echo value ;;
        124 | 137) echo timeout ;;
        125 | 126 | 127) echo "error $rc" ;;
        132) echo sigill ;;
        133) echo sigtrap ;;
        134) echo abort ;;
        135) echo sigbus ;;
        136) echo sigfpe ;;
        139) echo segv ;;
        *) if [ "$rc" -gt 128 ]; then echo "signal $((rc - 128))"; else echo "exit $rc"; fi ;;
    esac
}
is_caught() {
    case $1 in no | late* | timeout | error*) return 1 ;; *) return 0 ;; esac
}

header="| program |"; rule="|---|"
for c in "${COLUMNS_[@]}"; do header+=" ${c%%|*} |"; rule+="---|"; done
declare -A total
for size in $SIZES; do
    echo "### ALLOCATION_SIZE=$size"
    echo
    echo "$header"; echo "$rule"
    for c in "${COLUMNS_[@]}"; do total[$size|${c%%|*}]=0; done
    for file in "${PROGRAMS[@]}"; do
        name=${file%.*}
        row="| $name |"
        for c in "${COLUMNS_[@]}"; do
            # stderr dropped: the shell's own notes of a program killed by a signal
            v=$(verdict "${c#*|}" "$OUT_DIR/$size/$name" 2>/dev/null)
            if is_caught "$v"; then total[$size|${c%%|*}]=$((total[$size|${c%%|*}] + 1)); fi
            row+=" $v |"
        done
        echo "$row"
    done
    row="| **caught, of ${#PROGRAMS[@]}** |"
    for c in "${COLUMNS_[@]}"; do row+=" **${total[$size|${c%%|*}]}** |"; done
    echo "$row"
    echo
done

echo "### Caught, of ${#PROGRAMS[@]}, per allocation size"
echo
header="| ALLOCATION_SIZE |"; rule="|---|"
for c in "${COLUMNS_[@]}"; do header+=" ${c%%|*} |"; rule+="---|"; done
echo "$header"; echo "$rule"
for size in $SIZES; do
    row="| $size |"
    for c in "${COLUMNS_[@]}"; do row+=" ${total[$size|${c%%|*}]} |"; done
    echo "$row"
done
