"""Shared helpers: the preloadable library (for the preloaded-mode tests) and running Python
snippets in a fresh interpreter (the raw-allocator wrapper is installed once per process, so
tests of its installation need their own process)."""
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def preload_lib():
    env = os.environ.get("RESIZEALLOC_TEST_LIB")
    if env:
        return env
    for kind in ("debug", "release"):
        p = os.path.join(REPO, "target", kind, "libresizealloc.so")
        if os.path.isfile(p):
            return p
    return None


def run_py(code, env_extra=None, preload=None, check=True):
    """Runs `code` in a fresh interpreter; returns the CompletedProcess (text)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("RESIZEALLOC_")}
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError("child failed (%d)\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout, p.stderr))
    return p


@pytest.fixture
def lib_path():
    p = preload_lib()
    if p is None:
        pytest.skip("libresizealloc.so not built (cargo build -p resizealloc-preload)")
    return p
