"""CPython's own test_capi memory tests and NumPy's test_mem_policy.py, run with the package's
wrapper installed (and, for NumPy, inside regions so that its handler is active).

Each runs in a subprocess: a `.pth` file, present for the run only, installs the wrapper in
every interpreter the tests start (CPython's memory tests start children with PYTHONMALLOC=debug
and friends, some in isolated mode, which ignores PYTHONPATH but still reads .pth files)."""
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def wrapper_everywhere(tmp_path):
    """Every interpreter of this environment installs the wrapper at start (RESIZEALLOC_TEST_WRAP
    gates it, so other interpreters are unaffected)."""
    site = sysconfig.get_paths()["purelib"]
    pth = os.path.join(site, "resizealloc_test_wrap.pth")
    with open(pth, "w") as f:
        f.write("import os; exec(\"if os.environ.get('RESIZEALLOC_TEST_WRAP') == '1':\\n"
                " import resizealloc; resizealloc.region_begin(); resizealloc.region_end()\\n"
                " assert resizealloc._native.raw_wrapper_installed()\")\n")
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("RESIZEALLOC_")}
    env["RESIZEALLOC_TEST_WRAP"] = "1"
    try:
        yield env
    finally:
        os.unlink(pth)


def test_cpython_capi_memory_tests(wrapper_everywhere):
    if importlib.util.find_spec("test.test_capi") is None or importlib.util.find_spec("_testcapi") is None:
        pytest.skip("CPython's test package is not installed (Debian: libpython3-testsuite)")
    # In-process tests run inside a region too, so the allocator tests' hooks wrap the arena.
    code = (
        "import sys, unittest, resizealloc\n"
        "assert resizealloc._native.raw_wrapper_installed()\n"
        "suite = unittest.defaultTestLoader.loadTestsFromName('test.test_capi.test_misc')\n"
        "def flat(s):\n"
        "    for t in s:\n"
        "        yield from (flat(t) if isinstance(t, unittest.TestSuite) else [t])\n"
        "pick = [t for t in flat(suite) if any(k in t.id() for k in ('Mem', 'mem', 'alloc'))]\n"
        "print('selected', len(pick))\n"
        "with resizealloc.region():\n"
        "    r = unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite(pick))\n"
        "print('ran', r.testsRun, 'failures', len(r.failures), 'errors', len(r.errors), 'skipped', len(r.skipped))\n"
        "sys.exit(0 if r.wasSuccessful() and r.testsRun >= 10 else 1)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], env=wrapper_everywhere, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=900)
    print(p.stdout[-4000:])
    assert p.returncode == 0, p.stdout[-6000:]


def test_numpy_mem_policy(wrapper_everywhere):
    np = pytest.importorskip("numpy")
    if shutil.which("meson") is None and importlib.util.find_spec("mesonbuild") is None:
        pytest.skip("NumPy's test_mem_policy builds its extension with meson (pip install meson ninja)")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    tests = os.path.join(os.path.dirname(np.__file__), "_core", "tests", "test_mem_policy.py")
    if not os.path.exists(tests):
        tests = os.path.join(os.path.dirname(np.__file__), "core", "tests", "test_mem_policy.py")
    env = dict(wrapper_everywhere)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "region_plugin", "-p", "no:cacheprovider",
                        tests], env=dict(env, PYTHONPATH=HERE + "/upstream"), cwd=HERE + "/upstream",
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    print(p.stdout[-4000:])
    assert p.returncode == 0, p.stdout[-6000:]
    assert "passed" in p.stdout and "in region" in p.stdout
