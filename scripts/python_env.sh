#!/usr/bin/env bash
# The Python package (python/): a virtual environment in target/py with maturin, NumPy, pytest
# and what NumPy's test_mem_policy.py needs (python/requirements-test.txt), and the package's
# wheel built from this checkout (maturin compiles the Rust extension) and installed into it.
# Idempotent; called by scripts/setup.sh. Prints nothing but errors unless something changes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=target/py
if [ ! -x "$VENV/bin/python" ]; then
  echo "python_env: creating $VENV"
  "$PY" -m venv "$VENV"
fi
# --demo (scripts/demo.sh): what the demo runs, not the test suite's packages.
if [ "${1:-}" = --demo ]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check 'maturin>=1.4,<2' 'numpy>=1.22'
else
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r python/requirements-test.txt
fi
# The wheel users install (target/wheels, manylinux-tagged for this glibc: maturin checks the
# symbol versions it needs), then installed from the file, as a user would.
rm -f target/wheels/resizealloc-*.whl
# (maturin reports its progress on stderr: kept in a log, shown when the build fails)
mkdir -p target/wheels
PATH="$PWD/$VENV/bin:$PATH" nice -n 10 "$VENV/bin/maturin" build --quiet --release \
  -m python/Cargo.toml --compatibility manylinux_2_34 -o target/wheels >target/wheels/build.log 2>&1 \
  || { cat target/wheels/build.log >&2; echo "python_env: the wheel did not build" >&2; exit 1; }
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
  target/wheels/resizealloc-*.whl
