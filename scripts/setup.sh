#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine (idempotent; root or sudo).
#   C compiler for the test programs, the real programs the tests run (sqlite3, xz, git,
#   python3), mimalloc for the chaining test, and jemalloc and tcmalloc, which the benchmarks
#   (scripts/bench.sh, scripts/mem_bench.sh) compare against. Rust itself comes with the
#   machine (rustup).
#   --demo: only what scripts/demo.sh runs (a C compiler, tcmalloc, Python with venv, and the
#   Python package with NumPy), not the test suite's programs, peers and CUDA toolkits.
set -euo pipefail
DEMO=""; [ "${1:-}" = --demo ] && DEMO=1
need=()
command -v cc >/dev/null || need+=(gcc libc6-dev)
command -v python3 >/dev/null || need+=(python3)
[ -e /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ] || need+=(libtcmalloc-minimal4)
if [ -z "$DEMO" ]; then
  command -v g++ >/dev/null || need+=(g++) # nvcc's host compiler (scripts/cuda_env.sh)
  command -v objcopy >/dev/null && command -v readelf >/dev/null && command -v objdump >/dev/null || need+=(binutils)
  command -v sqlite3 >/dev/null || need+=(sqlite3)
  command -v xz >/dev/null || need+=(xz-utils)
  command -v git >/dev/null || need+=(git)
  [ -e /usr/lib/x86_64-linux-gnu/libmimalloc.so.2 ] || need+=(libmimalloc2.0)
  [ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || need+=(libjemalloc2)
fi
# Python package (python/, scripts/python_env.sh): venv, Python.h for the tests' C extensions,
# CPython's test package for its test_capi memory tests (Debian's system Python only).
if [ "$(command -v python3 || true)" = /usr/bin/python3 ]; then
  python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
  [ -e "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] || need+=(python3-dev)
  [ -n "$DEMO" ] || python3 -c 'import test.test_capi, _testcapi' 2>/dev/null || need+=("libpython$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-testsuite")
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust with rustup)"; exit 1; }
# Python package: target/py with NumPy, maturin, pytest, and the package itself.
bash "$(dirname "$0")/python_env.sh" ${DEMO:+--demo}
# CUDA toolkits and GPU Python packages from the package index, for building the GPU check's
# programs and its dry run without a GPU: target/cuda.
[ -n "$DEMO" ] || bash "$(dirname "$0")/cuda_env.sh"
