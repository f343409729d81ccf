#!/usr/bin/env bash
# CPython's and NumPy's own test suites under glibc and under libresizealloc.so in process mode
# (RESIZEALLOC_REGION=process, the route for programs nobody changes): the tests that fail
# under each, the ones that fail only under the library, and the wall time against glibc's.
#
#   bash scripts/pysuite.sh
#
# Environment:
#   ROUNDS=1           interleaved rounds; the time is the median of per-round ratios
#   CPY_TESTS="..."    CPython test modules (default: the allocation-heavy selection below;
#                      "all" for the whole suite, about 30 minutes a run on 2 cores)
#   NUMPY_ARGS="..."   pytest arguments for NumPy (default: its fast tests, `-m "not slow"`)
#   JOBS=2             CPython test workers (-j)
# Needs target/py (bash scripts/setup.sh) for NumPy and pytest. Writes target/pysuite/results.md
# and every run's log under target/pysuite/raw/.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-1}
JOBS=${JOBS:-2}
# Containers, text, serialisation, numbers, the garbage collector and threads: the tests whose
# work is mostly allocation of many small and mid-sized objects.
DEFAULT_CPY="test_dict test_list test_set test_tuple test_deque test_collections test_sort
test_heapq test_bisect test_array test_bytes test_unicode test_str test_string test_re
test_json test_pickle test_marshal test_struct test_itertools test_functools test_decimal
test_fractions test_statistics test_long test_float test_math test_gc test_weakref
test_threading test_queue test_csv test_textwrap test_difflib test_xml_etree test_zlib
test_lzma test_bz2 test_hashlib test_io test_memoryview test_mmap test_ctypes test_sqlite3"
CPY_TESTS=${CPY_TESTS:-$DEFAULT_CPY}
NUMPY_ARGS=${NUMPY_ARGS:-'-m "not slow"'}
OUT=$ROOT/target/pysuite
RAW=$OUT/raw
SO=$ROOT/target/release/libresizealloc.so
VPY=$ROOT/target/py/bin/python
PY=$(python3 -c 'import sys; print(sys.executable)') # the real binary, not a pyenv shim
mkdir -p "$RAW"
rm -f "$RAW"/*
[[ -x $VPY ]] || { echo "ERROR: $VPY missing (bash scripts/setup.sh)" >&2; exit 1; }
"$VPY" -c 'import numpy, pytest' || { echo "ERROR: NumPy or pytest missing in target/py" >&2; exit 1; }
"$PY" -c 'import test.libregrtest' 2>/dev/null ||
    { echo "ERROR: $PY has no test suite (Debian: apt-get install libpython3-testsuite)" >&2; exit 1; }
cargo build -q --release -p resizealloc-preload

declare -A ENVS=([glibc]="" [rz-process]="LD_PRELOAD=$SO RESIZEALLOC_REGION=process")
ALLOCS=(glibc rz-process)

# One run of one suite: RAW/<suite>.<alloc>.<round>.{log,failed,time}.
run_suite() {
    local suite=$1 alloc=$2 r=$3 base=$RAW/$1.$2.$3 rc=0 t0 t1
    local -a env_args cmd
    read -r -a env_args <<<"${ENVS[$alloc]}"
    if [[ $suite == cpython ]]; then
        local tests=$CPY_TESTS
        [[ $tests == all ]] && tests=""
        # shellcheck disable=SC2206 # the module list splits on purpose
        cmd=("$PY" -m test -j"$JOBS" --timeout 900 $tests)
    else
        # target/py/bin on PATH: some tests build extensions with the meson installed there.
        eval "cmd=(env PATH=\"$ROOT/target/py/bin:$PATH\" \"$VPY\" -m pytest --pyargs numpy -q \
            -p no:cacheprovider -rfE --continue-on-collection-errors $NUMPY_ARGS)"
    fi
    t0=$(date +%s.%N)
    (cd "$RAW" && env "${env_args[@]}" "${cmd[@]}" </dev/null >"$base.log" 2>&1) || rc=$?
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' >"$base.time"
    if [[ $suite == cpython ]]; then
        # regrtest: "N tests failed:" (or "N test failed:"), then indented names.
        awk '/tests? failed( again)?:$/ { on = 1; next } on && /^    / { for (i = 1; i <= NF; i++) print $i; next } { on = 0 }' \
            "$base.log" | sort -u >"$base.failed"
    else
        sed -n 's/^\(FAILED\|ERROR\) \([^ ]*\).*/\2/p' "$base.log" | sort -u >"$base.failed"
    fi
    echo "$suite under $alloc, round $r: exit $rc, $(wc -l <"$base.failed") failed, $(cat "$base.time") s" >&2
}

for ((r = 1; r <= ROUNDS; r++)); do
    for suite in cpython numpy; do
        # The allocator that starts alternates from round to round.
        if ((r % 2)); then order=(glibc rz-process); else order=(rz-process glibc); fi
        for alloc in "${order[@]}"; do run_suite "$suite" "$alloc" "$r"; done
    done
done

{
    echo "| suite | glibc s | rz-process / glibc | failed under glibc | failed under rz-process | only under rz-process |"
    echo "|---|---:|---:|---:|---:|---|"
    for suite in cpython numpy; do
        ratios=() ; gl=()
        for ((r = 1; r <= ROUNDS; r++)); do
            g=$(cat "$RAW/$suite.glibc.$r.time"); z=$(cat "$RAW/$suite.rz-process.$r.time")
            gl+=("$g"); ratios+=("$(awk -v g="$g" -v z="$z" 'BEGIN { printf "%.3f", z / g }')")
        done
        med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
        sort -u "$RAW/$suite".glibc.*.failed >"$RAW/$suite.glibc.all"
        sort -u "$RAW/$suite".rz-process.*.failed >"$RAW/$suite.rz-process.all"
        only=$(comm -13 "$RAW/$suite.glibc.all" "$RAW/$suite.rz-process.all" | tr '\n' ' ')
        printf '| %s | %.1f | %.2fx | %d | %d | %s |\n' "$suite" "$(med "${gl[@]}")" "$(med "${ratios[@]}")" \
            "$(wc -l <"$RAW/$suite.glibc.all")" "$(wc -l <"$RAW/$suite.rz-process.all")" "${only:-none}"
    done
    echo
    if [[ $CPY_TESTS == all ]]; then what="the whole suite"; else what="$(wc -w <<<"$CPY_TESTS") test modules"; fi
    echo "CPython $("$PY" -c 'import platform; print(platform.python_version())'): $what, -j$JOBS; NumPy $("$VPY" -c 'import numpy; print(numpy.__version__)'): pytest $NUMPY_ARGS; $ROUNDS interleaved round(s); $(nproc) CPUs."
} | tee "$OUT/results.md"
