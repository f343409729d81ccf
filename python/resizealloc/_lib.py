"""Finding libresizealloc.so for the GPU adapters (``torch``, ``cupy``, ``cuda_core``, ``numba``).

The device-pool entry points live in the preloadable library, not in this package's extension.
In order: ``RESIZEALLOC_LIB`` (a path), the library preloaded in this process, a copy shipped
next to this file (``resizealloc/libresizealloc.so``, if a build put one there).
"""
from __future__ import annotations

import ctypes
import os
from typing import Dict, Iterable, Optional

from . import _native

_HINT = (
    "build it with `cargo build --release -p resizealloc-preload` (target/release/libresizealloc.so) "
    "and set RESIZEALLOC_LIB to its path, or run under LD_PRELOAD=libresizealloc.so"
)
_loaded: Dict[str, ctypes.CDLL] = {}


def library_path() -> str:
    """The path of libresizealloc.so; RuntimeError with the fix when there is none."""
    env = os.environ.get("RESIZEALLOC_LIB")
    if env:
        if not os.path.isfile(env):
            raise RuntimeError("resizealloc: RESIZEALLOC_LIB=%s is not a file; %s" % (env, _HINT))
        return env
    pre = _native.preloaded_path()
    if pre:
        return pre
    shipped = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libresizealloc.so")
    if os.path.isfile(shipped):
        return shipped
    raise RuntimeError("resizealloc: libresizealloc.so not found; " + _HINT)


def load(path: Optional[str] = None, symbols: Iterable[str] = ()) -> ctypes.CDLL:
    """The library at ``path`` (default: ``library_path()``), checked for ``symbols``."""
    path = path or library_path()
    lib = _loaded.get(path)
    if lib is None:
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise RuntimeError("resizealloc: cannot load %s: %s" % (path, e)) from e
        _loaded[path] = lib
    missing = [s for s in symbols if not hasattr(lib, s)]
    if missing:
        raise RuntimeError(
            "resizealloc: %s does not export %s (a library built before the device-pool entry points?)"
            % (path, ", ".join(missing))
        )
    return lib


def function_address(lib: ctypes.CDLL, name: str) -> int:
    """The address of ``name`` in ``lib`` (for APIs that take C function pointers as integers)."""
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0


def require(module: str, framework: str):
    """Imports ``module`` or raises ImportError naming the framework the adapter needs."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError("resizealloc: this adapter needs %s (import %s failed: %s)" % (framework, module, e)) from e
