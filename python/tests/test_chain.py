"""Bad input: a Python whose raw allocator another tool already replaced. region() still works
and chains to that allocator outside regions (and for blocks it did not serve)."""
import os
import shutil
import subprocess
import sysconfig

import pytest

from conftest import run_py

TOOL_C = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A stand-in for a profiler: wraps the raw domain and counts the calls it sees. */
static PyMemAllocatorEx prev;
static unsigned long long n_malloc, n_free;

static void *t_malloc(void *ctx, size_t n) { __atomic_add_fetch(&n_malloc, 1, __ATOMIC_RELAXED); return prev.malloc(prev.ctx, n); }
static void *t_calloc(void *ctx, size_t a, size_t b) { __atomic_add_fetch(&n_malloc, 1, __ATOMIC_RELAXED); return prev.calloc(prev.ctx, a, b); }
static void *t_realloc(void *ctx, void *p, size_t n) { return prev.realloc(prev.ctx, p, n); }
static void t_free(void *ctx, void *p) { if (p) __atomic_add_fetch(&n_free, 1, __ATOMIC_RELAXED); prev.free(prev.ctx, p); }

static PyObject *install(PyObject *self, PyObject *args) {
    PyMemAllocatorEx mine = {NULL, t_malloc, t_calloc, t_realloc, t_free};
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &prev);
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &mine);
    Py_RETURN_NONE;
}
static PyObject *counts(PyObject *self, PyObject *args) { return Py_BuildValue("KK", n_malloc, n_free); }
static PyObject *raw_malloc(PyObject *self, PyObject *arg) { return PyLong_FromVoidPtr(PyMem_RawMalloc(PyLong_AsSize_t(arg))); }
static PyObject *raw_free(PyObject *self, PyObject *arg) { PyMem_RawFree(PyLong_AsVoidPtr(arg)); Py_RETURN_NONE; }

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, NULL}, {"counts", counts, METH_NOARGS, NULL},
    {"raw_malloc", raw_malloc, METH_O, NULL}, {"raw_free", raw_free, METH_O, NULL}, {NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "rawtool", NULL, -1, methods};
PyMODINIT_FUNC PyInit_rawtool(void) { return PyModule_Create(&mod); }
"""


@pytest.fixture
def rawtool(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    include = sysconfig.get_paths()["include"]
    if cc is None:
        pytest.skip("no C compiler")
    if not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip("no Python.h (python3-dev)")
    src = tmp_path / "rawtool.c"
    src.write_text(TOOL_C)
    out = tmp_path / ("rawtool" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-I" + include, str(src), "-o", str(out)], check=True)
    return str(tmp_path)


def test_region_chains_to_a_tool_installed_before(rawtool):
    p = run_py("""
        import sys
        sys.path.insert(0, %r)
        import rawtool
        rawtool.install()                    # the tool replaces the raw allocator first
        import resizealloc
        with resizealloc.region():           # installs the wrapper on top of the tool
            p_in = rawtool.raw_malloc(4096)
            assert resizealloc._native._owns(p_in)
        assert resizealloc._native.raw_wrapper_installed()
        m0, f0 = rawtool.counts()
        p_out = rawtool.raw_malloc(4096)     # outside a region: through the tool
        assert not resizealloc._native._owns(p_out)
        m1, f1 = rawtool.counts()
        assert m1 == m0 + 1, (m0, m1)
        rawtool.raw_free(p_out)
        rawtool.raw_free(p_in)               # the arena's block: not the tool's business
        m2, f2 = rawtool.counts()
        assert f2 == f1 + 1, (f1, f2)
        with resizealloc.region():
            small = rawtool.raw_malloc(100)  # small raw requests stay with the tool
        assert not resizealloc._native._owns(small)
        rawtool.raw_free(small)
        junk = [bytes(2000) for _ in range(1000)]
        del junk
        print("ok")
    """ % rawtool)
    assert p.stdout.strip() == "ok"


def test_tracemalloc_tracing_leaves_the_raw_allocator_alone():
    # tracemalloc restores the raw allocator it saved when it stops (and at exit): the wrapper
    # must not be installed under it. NumPy arrays still use the arena.
    p = run_py("""
        import tracemalloc
        tracemalloc.start()
        import resizealloc
        with resizealloc.region():
            b = bytes(100_000)
        assert not resizealloc._native.raw_wrapper_installed()
        assert not resizealloc._native._owns(id(b))
        tracemalloc.stop()
        with resizealloc.region():
            b2 = bytes(100_000)
        assert resizealloc._native.raw_wrapper_installed()
        assert resizealloc._native._owns(id(b2))
        print("ok")
    """)
    assert p.stdout.strip() == "ok"
