#!/usr/bin/env bash
# What scripts/gpu_build_check.sh needs to build and dry-run the GPU check on a machine without
# a GPU, from the Python package index (no driver, nothing system-wide), pinned, each in its own
# virtual environment under target/cuda:
#   13.5  the CUDA toolkit's newest release: nvcc, the headers, libcudart.so.13 and
#         libcudart_static.a;
#   13.0  its oldest release whose nvcc is on the index. The hooks also claim CUDA 11 and 12
#         (cudart 11.3 and later), but the index's -cu11 and -cu12 nvcc packages hold ptxas
#         only. (13.0's first build, 13.0.48, cannot compile as installed: its cicc is not where
#         its nvcc looks; 13.0.88 is the same release's update.)
#   py    the GPU packages of scripts/gpu/*.py that are small enough for CI (cuda.core, CuPy,
#         Numba's CUDA target); PyTorch is not one (its wheel brings gigabytes of CUDA libraries).
# <release>/toolkit links to the toolkit's root (bin/nvcc, include, lib), which gets what the
# full installer has and these packages lack: the unversioned lib/libcudart.so (nvcc -cudart
# shared links with -lcudart) and lib64, where 13.0's nvcc looks for libraries.
# Idempotent; called by scripts/setup.sh. Prints nothing but errors unless something changes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

current() { # name, pinned packages...: whether target/cuda/<name> has exactly these
  local dir=target/cuda/$1; shift
  [ -x "$dir/bin/python" ] && [ "$(cat "$dir/pinned" 2>/dev/null)" = "$*" ]
}

venv() { # name, pinned packages... (--no-deps: exactly these, dependencies listed too)
  local dir=target/cuda/$1; shift
  echo "cuda_env: installing $* into $dir"
  rm -rf "$dir"
  "$PY" -m venv "$dir"
  # --no-compile: most of these modules are never imported here; those that are compile then.
  "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-compile "$@"
}

toolkit() { # release, pinned packages...
  local rel=$1 dir=target/cuda/$1
  if current "$@"; then return 0; fi
  venv "$@"
  local root # relative to $dir
  root=$("$dir/bin/python" -c 'import os, sys, sysconfig; print(os.path.relpath(sysconfig.get_paths()["purelib"], sys.prefix))')/nvidia/cu13
  [ -x "$dir/$root/bin/nvcc" ] || { echo "cuda_env: no nvcc in $dir/$root"; exit 1; }
  ln -sfn "$root" "$dir/toolkit"
  ln -sfn libcudart.so.13 "$dir/toolkit/lib/libcudart.so"
  [ -e "$dir/toolkit/lib64" ] || ln -s lib "$dir/toolkit/lib64"
  "$dir/toolkit/bin/nvcc" --version | grep "release $rel," >/dev/null || { echo "cuda_env: $dir is not CUDA $rel"; exit 1; }
  shift
  echo "$*" >"$dir/pinned"
}

toolkit 13.5 nvidia-cuda-nvcc==13.5.37 nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37 \
  nvidia-nvvm==13.5.37 nvidia-cuda-cccl==13.3.5.0.6
toolkit 13.0 nvidia-cuda-nvcc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 \
  nvidia-nvvm==13.0.88 nvidia-cuda-cccl==13.0.85
GPU_PY="cuda-core==1.2.2 cuda-bindings==13.5.0 cuda-pathfinder==1.9.0 cupy-cuda13x==14.2.0
  numba==0.68.1 numba-cuda==0.30.4 llvmlite==0.50.0 numpy==2.4.6 packaging==26.4"
# shellcheck disable=SC2086 # one word per package
if ! current py $GPU_PY; then
  venv py $GPU_PY
  echo $GPU_PY >target/cuda/py/pinned
fi
