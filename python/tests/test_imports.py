"""The package imports cleanly where the library is preloaded, where it is not, and where NumPy
(or a GPU framework) is missing; the GPU adapters' own logic without a GPU."""
import ctypes.util
import os
import sys
import types

import pytest

from conftest import run_py

ADAPTERS = ("torch", "cupy", "cuda_core", "numba")


def test_import_without_numpy():
    p = run_py("""
        import sys
        sys.modules["numpy"] = None          # import numpy now raises ImportError
        import resizealloc
        import resizealloc.torch, resizealloc.cupy, resizealloc.cuda_core, resizealloc.numba
        with resizealloc.region():
            blob = bytes(100_000)
        assert resizealloc._native._owns(id(blob))
        assert "numpy" not in sys.modules or sys.modules["numpy"] is None
        print("ok", resizealloc.preloaded())
    """)
    assert p.stdout.split() == ["ok", "False"]


def test_import_does_not_import_numpy_or_frameworks():
    p = run_py("""
        import sys, resizealloc
        import resizealloc.torch, resizealloc.cupy, resizealloc.cuda_core, resizealloc.numba
        with resizealloc.region():
            pass
        print(sorted(m for m in ("numpy", "torch", "cupy", "cuda", "numba") if m in sys.modules))
    """)
    assert p.stdout.strip() == "[]"


def test_import_preloaded(lib_path):
    p = run_py("""
        import resizealloc, numpy as np
        assert resizealloc.preloaded()
        before = resizealloc.stats().thread.region_allocs
        with resizealloc.region():
            a = np.ones(100_000)
            assert resizealloc.region_depth() == 1
        after = resizealloc.stats().thread.region_allocs
        # the preloaded library's markers and arenas: NumPy's default handler mallocs through it
        assert after > before, (before, after)
        assert not resizealloc._native.raw_wrapper_installed()
        try:
            resizealloc.region_end()
        except RuntimeError as e:
            print("raised", "without a matching" in str(e))
        print(resizealloc.preloaded_path())
    """, preload=lib_path)
    lines = p.stdout.split("\n")
    assert lines[0] == "raised True"
    assert os.path.realpath(lines[1]) == os.path.realpath(lib_path)


def test_library_loaded_but_not_preloaded_is_not_preloaded(lib_path):
    p = run_py("""
        import ctypes
        ctypes.CDLL(%r, mode=ctypes.RTLD_GLOBAL)   # exports the markers, serves nobody's malloc
        import resizealloc
        print(resizealloc.preloaded())
    """ % lib_path)
    assert p.stdout.strip() == "False"


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapter_without_framework_raises_only_on_use(name, monkeypatch):
    import importlib

    mod = importlib.import_module("resizealloc." + name)
    framework = {"torch": "torch", "cupy": "cupy", "cuda_core": "cuda", "numba": "numba"}[name]
    monkeypatch.setitem(sys.modules, framework, None)
    if name == "cuda_core":
        monkeypatch.setitem(sys.modules, "cuda.core", None)
        monkeypatch.setitem(sys.modules, "cuda.core.experimental", None)
    if name == "numba":
        monkeypatch.setitem(sys.modules, "numba.cuda", None)
        with pytest.raises(ImportError, match="needs Numba"):
            mod.ResizeMemoryManager
    elif name == "cuda_core":
        with pytest.raises(ImportError, match="needs cuda.core"):
            mod.memory_resource()
    else:
        with pytest.raises(ImportError, match="needs"):
            mod.use()


def test_library_path_order(monkeypatch, tmp_path):
    from resizealloc import _lib

    monkeypatch.delenv("RESIZEALLOC_LIB", raising=False)
    with pytest.raises(RuntimeError, match="RESIZEALLOC_LIB"):
        _lib.library_path()
    monkeypatch.setenv("RESIZEALLOC_LIB", str(tmp_path / "missing.so"))
    with pytest.raises(RuntimeError, match="is not a file"):
        _lib.library_path()
    fake = tmp_path / "libresizealloc.so"
    fake.write_bytes(b"")
    monkeypatch.setenv("RESIZEALLOC_LIB", str(fake))
    assert _lib.library_path() == str(fake)


def test_missing_entry_points_are_named(monkeypatch):
    from resizealloc import _lib

    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to stand in for a library without the entry points")
    with pytest.raises(RuntimeError, match="does not export resize_torch_alloc"):
        _lib.load(libm, ("cos", "resize_torch_alloc"))


def _fake_torch(calls):
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(memory=types.SimpleNamespace(
        CUDAPluggableAllocator=lambda path, a, f: calls.append(("alloc", path, a, f)) or "ALLOC",
        change_current_allocator=lambda alloc: calls.append(("change", alloc)),
    ))
    return torch


def test_torch_use_with_a_stand_in(monkeypatch, lib_path):
    # No PyTorch here: a stand-in module records the calls use() makes. The library must export
    # the entry points, which the device-pool work adds; skip on a library without them.
    from resizealloc import _lib

    if not hasattr(_lib.load(lib_path), "resize_torch_alloc"):
        pytest.skip("this libresizealloc.so predates resize_torch_alloc")
    calls = []
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(calls))
    monkeypatch.setenv("RESIZEALLOC_LIB", lib_path)
    import resizealloc.torch

    assert resizealloc.torch.use() == "ALLOC"
    assert calls == [("alloc", lib_path, "resize_torch_alloc", "resize_torch_free"), ("change", "ALLOC")]


def test_cupy_use_with_a_stand_in(monkeypatch, lib_path):
    from resizealloc import _lib

    lib = _lib.load(lib_path)
    if not hasattr(lib, "resize_cupy_malloc"):
        pytest.skip("this libresizealloc.so predates resize_cupy_malloc")
    calls = []

    class CFunctionAllocator:
        def __init__(self, param, malloc, free, owner):
            calls.append((param, malloc, free, owner))
            self.malloc = "MALLOC"

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(memory=types.SimpleNamespace(CFunctionAllocator=CFunctionAllocator),
                                      set_allocator=lambda f: calls.append(f))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setenv("RESIZEALLOC_LIB", lib_path)
    import resizealloc.cupy

    resizealloc.cupy.use()
    (param, m, f, owner), setter = calls
    assert param == 0 and m == _lib.function_address(lib, "resize_cupy_malloc") != 0
    assert f == _lib.function_address(lib, "resize_cupy_free") != 0
    assert setter == "MALLOC"


def test_cuda_core_stream_handles():
    from resizealloc.cuda_core import stream_handle

    class S:
        handle = 1234

    class P:
        def __cuda_stream__(self):
            return (0, 99)

    assert stream_handle(None) == 0
    assert stream_handle(S()) == 1234
    assert stream_handle(P()) == 99
    assert stream_handle(7) == 7
