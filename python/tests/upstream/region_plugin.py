"""pytest plugin for running NumPy's test_mem_policy.py with resizealloc active: each test's
call runs inside resizealloc.region(), so the NEP 49 wrapper handler is NumPy's current
handler (it wraps whatever the test finds) and the raw wrapper is installed."""
import pytest

import resizealloc

_ran = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with resizealloc.region():
        _ran.append(item.nodeid)
        yield


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("resizealloc: %d tests ran in region (raw wrapper installed: %s)"
                                % (len(_ran), resizealloc._native.raw_wrapper_installed()))
