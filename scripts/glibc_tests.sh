#!/usr/bin/env bash
# glibc's own malloc tests (tests/glibc/: upstream files from glibc 2.36's malloc/ and a few
# newer ones, on a small stand-in for glibc's support/ harness) against libresizealloc.so.
# Each test runs three ways:
#
#   plain    the installed glibc alone: the reference
#   markers  LD_PRELOAD=libresizealloc.so, RESIZEALLOC_REGION=on, and the whole test inside
#            a region (GLIBC_TEST_REGION=1: the test driver begins one around do_test)
#   process  LD_PRELOAD=libresizealloc.so, RESIZEALLOC_REGION=process
#
# It prints one line per test and mode, then "glibc malloc tests: N passed, M failed" (a run
# passes if it passes, or if it ends as the plain run did where that is unsupported or a
# known failure). It exits 1 if a test that passes plain does not pass under the library; a
# test that fails plain is reported as failing under glibc itself and does not fail the script.
#
#   bash scripts/glibc_tests.sh                    build and run every test in every mode
#   bash scripts/glibc_tests.sh TEST               one test (tst-mallocfork2), three modes
#   bash scripts/glibc_tests.sh TEST MODE          one run (MODE: plain, markers, process),
#                                                  its whole output printed
#   bash scripts/glibc_tests.sh --list             the tests
#
# Environment:
#   RESIZEALLOC_SO        the library (default target/release/libresizealloc.so)
#   GLIBC_TESTS_TIMEOUT   seconds one run may take (default 40); past it: TIMEOUT
#   GLIBC_TESTS_JOBS      tests run at a time (default 2; a test's three runs go one by one)
#   GLIBC_TESTS_FULL=1    tst-mallocfork2 and tst-mallocfork3 with upstream's 10,000 iterations
#                         (default 1,000: each iteration costs about six forks; 10,000 take
#                         40 s per run on two cores)
#   CC                    the compiler (default gcc)
#
# Binaries, logs (target/glibc-tests/logs/TEST.MODE.log) and the scaled sources go to
# target/glibc-tests/.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=target/glibc-tests
SRC=tests/glibc
CC=${CC:-gcc}
LIMIT=${GLIBC_TESTS_TIMEOUT:-40}
JOBS=${GLIBC_TESTS_JOBS:-2}
FULL=${GLIBC_TESTS_FULL:-0}
SO=${RESIZEALLOC_SO:-target/release/libresizealloc.so}
MODES=(plain markers process)

# As glibc builds its tests (Makeconfig's +cflags), with _GNU_SOURCE, which glibc's internal
# headers define. -iquote: a test's "..." includes (../test-skeleton.c, tst-malloc.c) resolve
# from its own folder, also when its source is the scaled copy in target/.
CFLAGS=(-std=gnu11 -fgnu89-inline -O2 -g -Wall -fmerge-all-constants
        -frounding-math -fno-stack-protector -fno-common -D_GNU_SOURCE -pthread
        -I"$SRC" -I"$SRC/include")

# test | source under tests/glibc/
TESTS=(
    "tst-malloc|malloc/tst-malloc.c"
    "tst-calloc|malloc/tst-calloc.c"
    "tst-realloc|malloc/tst-realloc.c"
    "tst-reallocarray|malloc/tst-reallocarray.c"
    "tst-memalign|malloc/tst-memalign.c"
    "tst-posix_memalign|malloc/tst-posix_memalign.c"
    "tst-valloc|malloc/tst-valloc.c"
    "tst-pvalloc|malloc/tst-pvalloc.c"
    "tst-pvalloc-fortify|malloc/tst-pvalloc-fortify.c"
    "tst-mallocalign1|malloc/tst-mallocalign1.c"
    "tst-malloc-too-large|malloc/tst-malloc-too-large.c"
    "tst-free-errno|malloc/tst-free-errno.c"
    "tst-tcfree3|malloc/tst-tcfree3.c"
    "tst-mallopt|malloc/tst-mallopt.c"
    "tst-trim1|malloc/tst-trim1.c"
    "tst-mallinfo2|malloc/tst-mallinfo2.c"
    "tst-malloc_info|malloc/tst-malloc_info.c"
    "tst-malloc-stats-cancellation|malloc/tst-malloc-stats-cancellation.c"
    "tst-obstack|malloc/tst-obstack.c"
    "mallocbug|mallocbug-driver.c"
    "tst-mallocfork|malloc/tst-mallocfork.c"
    "tst-mallocfork2|malloc/tst-mallocfork2.c"
    "tst-mallocfork3|malloc/tst-mallocfork3.c"
    "tst-malloc-fork-deadlock|malloc/tst-malloc-fork-deadlock.c"
    "tst-malloc-thread-exit|malloc/tst-malloc-thread-exit.c"
    "tst-malloc-thread-fail|malloc/tst-malloc-thread-fail.c"
    "tst-malloc-tcache-leak|malloc/tst-malloc-tcache-leak.c"
    "tst-aligned-alloc|malloc-2.42/tst-aligned-alloc.c"
    "tst-malloc-alternate-path|malloc-2.42/tst-malloc-alternate-path.c"
    "tst-malloc-random|malloc-2.42/tst-malloc-random.c"
    "tst-aligned-alloc-random|malloc-2.42/tst-aligned-alloc-random.c"
    "tst-aligned-alloc-random-thread|malloc-2.42/tst-aligned-alloc-random-thread.c"
    "tst-aligned-alloc-random-thread-cross|malloc-2.42/tst-aligned-alloc-random-thread-cross.c"
)

# Tests that glibc's Makefile runs with its interposer preloaded (tst-aligned_alloc-lib.so:
# a malloc that picks aligned_alloc, __libc_calloc or __libc_malloc at random). It comes first
# in LD_PRELOAD, the library after it, in the place of glibc's malloc.
declare -A INTERPOSED=([tst-malloc-random]=1 [tst-aligned-alloc-random]=1
    [tst-aligned-alloc-random-thread]=1 [tst-aligned-alloc-random-thread-cross]=1)

# Tests of a newer glibc that the installed one fails: the plain run's failure is expected,
# and a run under the library passes if it fails with the same errors.
declare -A NEWER=(
    [tst-aligned-alloc]="tests glibc 2.38, whose aligned_alloc fails for an alignment that is not a power of two; 2.36's rounds it up"
)

# Scaled tests (unless GLIBC_TESTS_FULL=1): sed expression applied to the upstream source.
declare -A SCALED=(
    [tst-mallocfork2]='s/^enum { iterations = 10000 };$/enum { iterations = 1000 };/'
    [tst-mallocfork3]='s/^enum { iterations = 10000 };$/enum { iterations = 1000 };/'
)

source_of() {
    local entry
    for entry in "${TESTS[@]}"; do
        [[ ${entry%%|*} == "$1" ]] && { echo "${entry#*|}"; return 0; }
    done
    return 1
}

if [[ ${1:-} == --list ]]; then
    for entry in "${TESTS[@]}"; do echo "${entry%%|*}"; done
    exit 0
fi

ONLY_TEST=${1:-}
ONLY_MODE=${2:-}
if [[ -n $ONLY_TEST ]] && ! source_of "$ONLY_TEST" >/dev/null; then
    echo "glibc_tests.sh: no test $ONLY_TEST (--list lists them)"; exit 2
fi
if [[ -n $ONLY_MODE && ! " ${MODES[*]} " =~ \ $ONLY_MODE\  ]]; then
    echo "glibc_tests.sh: no mode $ONLY_MODE (plain, markers or process)"; exit 2
fi
if [[ $ONLY_MODE != plain ]]; then
    [[ -f $SO ]] || { echo "glibc_tests.sh: $SO does not exist (build it, or set RESIZEALLOC_SO)"; exit 2; }
    SO=$(realpath "$SO")
fi
if [[ $SO$PWD == *[[:space:]]* ]]; then
    echo "glibc_tests.sh: the library's path and the repository's must not hold spaces"; exit 2
fi

# --- Build ---------------------------------------------------------------------------------

mkdir -p "$OUT/bin" "$OUT/src" "$OUT/logs"
HEADERS=("$SRC"/support/*.h "$SRC"/include/*.h "$SRC"/test-skeleton.c "$SRC"/support/test-driver.c)

# newer_than TARGET FILE...: TARGET is missing or older than one of the files
newer_than() {
    local t=$1 f; shift
    [[ -f $t ]] || return 0
    for f in "$@"; do [[ $f -nt $t ]] && return 0; done
    return 1
}

build_failed=0
build() { # build TARGET COMMAND...: run the command, show its output if it fails
    local target=$1 log; shift
    if ! log=$("$@" 2>&1); then
        echo "BUILD FAILED: $target"; echo "$log" | sed 's/^/    /'; return 1
    fi
}

SUPPORT_O="$OUT/bin/support.o"
if newer_than "$SUPPORT_O" "$SRC/support/support.c" "${HEADERS[@]}" "$0"; then
    build support.o "$CC" "${CFLAGS[@]}" -c "$SRC/support/support.c" -o "$SUPPORT_O" || exit 1
fi
INTERPOSER="$PWD/$OUT/bin/tst-aligned_alloc-lib.so"
if newer_than "$INTERPOSER" "$SRC/malloc-2.42/tst-aligned_alloc-lib.c" "${HEADERS[@]}" "$0"; then
    build tst-aligned_alloc-lib.so "$CC" "${CFLAGS[@]}" -fPIC -shared \
        "$SRC/malloc-2.42/tst-aligned_alloc-lib.c" -o "$INTERPOSER" || exit 1
fi

pids=()
for entry in "${TESTS[@]}"; do
    name=${entry%%|*} src="$SRC/${entry#*|}"
    [[ -n $ONLY_TEST && $name != "$ONLY_TEST" ]] && continue
    deps=("$src" "$SUPPORT_O" "${HEADERS[@]}" "$0" "$SRC"/malloc*/*.h)
    if [[ -n ${SCALED[$name]:-} && $FULL != 1 ]]; then
        scaled="$OUT/src/$name.c"
        sed "${SCALED[$name]}" "$src" > "$scaled.tmp"
        if cmp -s "$src" "$scaled.tmp"; then
            echo "BUILD FAILED: $name: '${SCALED[$name]}' changes nothing in $src"; exit 1
        fi
        cmp -s "$scaled.tmp" "$scaled" 2>/dev/null && rm "$scaled.tmp" || mv "$scaled.tmp" "$scaled"
        cflags=(-iquote "$(dirname "$src")")
        src=$scaled
    else
        cflags=()
        rm -f "$OUT/src/$name.c"
    fi
    if [[ -n ${SCALED[$name]:-} ]]; then
        # The scaled source and the upstream one build the same binary: rebuild it when the
        # choice changes.
        stamp="$OUT/bin/$name.full"
        [[ $(cat "$stamp" 2>/dev/null) == "$FULL" ]] || { rm -f "$OUT/bin/$name"; echo "$FULL" > "$stamp"; }
    fi
    if newer_than "$OUT/bin/$name" "${deps[@]}" "$src"; then
        build "$name" "$CC" "${CFLAGS[@]}" "${cflags[@]}" "$src" "$SUPPORT_O" -o "$OUT/bin/$name" &
        pids+=($!)
        if (( ${#pids[@]} >= 2 )); then wait "${pids[0]}" || build_failed=1; pids=("${pids[@]:1}"); fi
    fi
done
for pid in "${pids[@]}"; do wait "$pid" || build_failed=1; done
(( build_failed )) && exit 1

# --- Run -----------------------------------------------------------------------------------

# mode_env TEST MODE: the environment of a run (words without spaces: LD_PRELOAD's list is
# separated with colons)
mode_env() {
    local preload=""
    [[ -n ${INTERPOSED[$1]:-} ]] && preload=$INTERPOSER
    case $2 in
        plain) echo "LD_PRELOAD=$preload" ;;
        markers) echo "LD_PRELOAD=${preload:+$preload:}$SO RESIZEALLOC_REGION=on GLIBC_TEST_REGION=1" ;;
        process) echo "LD_PRELOAD=${preload:+$preload:}$SO RESIZEALLOC_REGION=process" ;;
    esac
}

# run TEST MODE: runs it; sets STATE (PASS, FAIL, TIMEOUT, UNSUPPORTED), SECS and LOG
run() {
    local name=$1 mode=$2 env start rc
    env=$(mode_env "$name" "$mode")
    LOG="$OUT/logs/$name.$mode.log"
    start=$EPOCHREALTIME
    # The driver's own timeouts (upstream's TIMEOUT, times TIMEOUTFACTOR) stay above LIMIT,
    # so that one limit applies to every test; timeout's TERM makes the driver kill the
    # test's process group. The subshell keeps bash's line about a driver killed by a signal
    # out of the output.
    # shellcheck disable=SC2086 # $env is a list of assignments
    ( timeout -k 5 "$LIMIT" env -u LD_PRELOAD -u RESIZEALLOC_REGION -u GLIBC_TEST_REGION \
        TIMEOUTFACTOR=100 $env "$OUT/bin/$name" > "$LOG" 2>&1 < /dev/null ) 2> /dev/null
    rc=$?
    SECS=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    case $rc in
        0) STATE=PASS ;;
        77) STATE=UNSUPPORTED ;;
        124) STATE=TIMEOUT ;;
        # timeout's KILL, 5 s after its TERM; before the limit, something else killed it.
        137) if awk -v s="$SECS" -v l="$LIMIT" 'BEGIN { exit !(s >= l) }'; then STATE=TIMEOUT; else STATE=FAIL; fi ;;
        *) STATE=FAIL ;;
    esac
    if [[ $STATE == FAIL ]] && (( rc > 128 )); then
        echo "(the test driver died of signal $((rc - 128)))" >> "$LOG"
    fi
}

# The lines starting with "error:" of a log: what a known failure must repeat.
errors_of() { grep '^error:' "$1" | sed 's/[0-9a-fx]\{8,\}/ADDR/g' || true; }

show_failure() {
    # The last lines of the log, a line repeated in a row shown once with its count.
    awk 'function out() { if (n) print "    | " last (n > 1 ? "  [" n " times]" : "") }
         $0 == last && n { n++; next } { out(); last = $0; n = 1 } END { out() }' "$LOG" | tail -n 15
    echo "    log: $LOG"
    echo "    rerun: $(mode_env "$1" "$2") $OUT/bin/$1"
}

line() { printf '%-12s %-38s %-8s %6ss%s\n' "$1" "$2" "$3" "$4" "${5:+  ($5)}"; }

if [[ -n $ONLY_MODE ]]; then
    run "$ONLY_TEST" "$ONLY_MODE"
    cat "$LOG"
    line "$STATE" "$ONLY_TEST" "$ONLY_MODE" "$SECS"
    echo "rerun: $(mode_env "$ONLY_TEST" "$ONLY_MODE") $OUT/bin/$ONLY_TEST"
    [[ $STATE == PASS || $STATE == UNSUPPORTED ]]
    exit
fi

# test_one TEST: its three runs; prints their lines, and writes to $OUT/results/TEST the
# counts: "passed failed", then one line per run that fails under the library only.
test_one() {
    local name=$1 note="" ref ref_errors mode passed=0 failed=0 regressions=()
    [[ -n ${SCALED[$name]:-} && $FULL != 1 ]] && note="1,000 of upstream's 10,000 iterations"

    # The reference.
    run "$name" plain
    ref=$STATE ref_errors=$(errors_of "$LOG")
    if [[ $ref == PASS || $ref == UNSUPPORTED ]]; then
        passed=$((passed + 1)); line "$STATE" "$name" plain "$SECS" "$note"
    elif [[ -n ${NEWER[$name]:-} ]]; then
        ref=KNOWN; passed=$((passed + 1)); line "$STATE" "$name" plain "$SECS" "expected: ${NEWER[$name]}"
    else
        ref=BROKEN; failed=$((failed + 1)); line "$STATE" "$name" plain "$SECS" "fails under glibc itself"
        show_failure "$name" plain
    fi

    for mode in markers process; do
        run "$name" "$mode"
        case $ref:$STATE in
            PASS:PASS | UNSUPPORTED:UNSUPPORTED | BROKEN:PASS)
                passed=$((passed + 1)); line "$STATE" "$name" "$mode" "$SECS" "$note" ;;
            UNSUPPORTED:PASS)
                passed=$((passed + 1)); line "$STATE" "$name" "$mode" "$SECS" "unsupported plain" ;;
            KNOWN:PASS)
                passed=$((passed + 1))
                line "$STATE" "$name" "$mode" "$SECS" "unlike the installed glibc, which fails it" ;;
            KNOWN:*)
                if [[ $STATE != TIMEOUT && $(errors_of "$LOG") == "$ref_errors" ]]; then
                    passed=$((passed + 1)); line "$STATE" "$name" "$mode" "$SECS" "expected: as the installed glibc"
                else
                    failed=$((failed + 1)); line "$STATE" "$name" "$mode" "$SECS" "not as the installed glibc fails it"
                    show_failure "$name" "$mode"
                fi ;;
            PASS:*)
                failed=$((failed + 1)); regressions+=("$name ($mode)")
                line "$STATE" "$name" "$mode" "$SECS" "passes plain"
                show_failure "$name" "$mode" ;;
            *)
                failed=$((failed + 1)); line "$STATE" "$name" "$mode" "$SECS" "plain: $ref"
                show_failure "$name" "$mode" ;;
        esac
    done
    { echo "$passed $failed"; printf '%s\n' "${regressions[@]}"; } > "$OUT/results/$name"
}

# JOBS tests at a time, their lines printed in the list's order.
started=$EPOCHREALTIME
names=()
for entry in "${TESTS[@]}"; do
    [[ -z $ONLY_TEST || ${entry%%|*} == "$ONLY_TEST" ]] && names+=("${entry%%|*}")
done
rm -rf "$OUT/results"; mkdir -p "$OUT/results"
declare -A job
next=0
for (( i = 0; i < ${#names[@]}; i++ )); do
    while (( next < ${#names[@]} && next < i + JOBS )); do
        test_one "${names[next]}" > "$OUT/results/${names[next]}.lines" 2>&1 &
        job[${names[next]}]=$!
        next=$((next + 1))
    done
    wait "${job[${names[i]}]}"
    cat "$OUT/results/${names[i]}.lines"
done

passed=0 failed=0 regressions=()
for name in "${names[@]}"; do
    { read -r p f; mapfile -t r; } < "$OUT/results/$name"
    passed=$((passed + p)) failed=$((failed + f))
    for x in "${r[@]}"; do [[ -n $x ]] && regressions+=("$x"); done
done
total=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
echo "library: $SO; ${#names[@]} tests, $JOBS at a time, ${total} s"
if (( ${#regressions[@]} )); then
    echo "passing plain, failing under the library: ${regressions[*]}"
fi
echo "glibc malloc tests: $passed passed, $failed failed"
(( ${#regressions[@]} == 0 ))
