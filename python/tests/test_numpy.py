"""NumPy array data from the arena through the NEP 49 handler (no LD_PRELOAD)."""
import threading

import pytest

import resizealloc
from resizealloc import region

np = pytest.importorskip("numpy")
try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # NumPy 1.x
    from numpy.core.multiarray import get_handler_name

HANDLER = resizealloc._native.NUMPY_HANDLER_NAME
# Arrays whose ownership the tests assert are 1 MiB or more: after regions that leave blocks
# behind (these tests escape on purpose), the arena's lifetime predictor may send smaller
# requests of the same size class to the previous handler; requests of 1 MiB or more stay in
# the arena whatever the predictor says. Small arrays are checked in a fresh process below.
BIG = 150_000  # float64 elements: 1.2 MiB


def owns(a):
    return resizealloc._native._owns(a.ctypes.data)


def test_arrays_in_region_are_served_by_the_arena():
    base = get_handler_name()
    before = resizealloc.stats()
    with region():
        assert get_handler_name() == HANDLER
        a = np.arange(BIG, dtype=np.float64)
        b = a * 2.0 + 1.0
        z = np.zeros(BIG)
        inside = resizealloc.stats()
    assert get_handler_name() == base  # restored after the block
    assert get_handler_name(b) == HANDLER
    assert owns(a) and owns(b) and owns(z)
    assert inside.thread.region_allocs >= before.thread.region_allocs + 3
    assert inside.memory.thread_live >= a.nbytes + b.nbytes + z.nbytes
    # contents intact after the block
    assert b[0] == 1.0 and b[-1] == 2.0 * (BIG - 1) + 1.0 and float(b.sum()) == float((a * 2.0 + 1.0).sum())
    assert not z.any()
    outside = np.ones(100_000)
    assert not owns(outside)
    assert get_handler_name(outside) == base


def test_arrays_escape_and_are_freed_on_other_threads():
    with region():
        arrs = [np.full(BIG + i, i, dtype=np.int64) for i in range(20)]
    assert all(owns(a) for a in arrs)
    live_before = resizealloc.stats().memory.process_live
    sums = []

    def consumer():
        sums.append(sum(int(a.sum()) for a in arrs))
        arrs.clear()  # the arrays' data is freed on this thread

    t = threading.Thread(target=consumer)
    t.start()
    t.join()
    assert sums == [sum(i * (BIG + i) for i in range(20))]
    assert resizealloc.stats().memory.process_live < live_before


def test_resize_across_the_boundary():
    with region():
        a = np.arange(1000, dtype=np.float64)
        a.resize(BIG, refcheck=False)  # realloc inside the region
        assert owns(a)
    assert a[999] == 999.0 and not a[1000:].any()
    a.resize(3_000_000, refcheck=False)  # realloc outside: the block leaves the arena
    assert a[999] == 999.0 and a.size == 3_000_000
    b = np.arange(100_000.0)
    with region():
        b.resize(400_000, refcheck=False)  # a block of the previous handler, grown in a region
        c = np.resize(b, 10)
    assert b[5] == 5.0 and c[9] == 9.0
    del a, b, c


def test_nested_regions_and_handler_restore():
    base = get_handler_name()
    with region():
        with region():
            assert get_handler_name() == HANDLER
            x = np.ones(BIG)
        assert get_handler_name() == HANDLER
        y = np.ones(BIG)
    assert get_handler_name() == base
    assert owns(x) and owns(y)


def test_generator_interleaving_keeps_handlers_consistent():
    base = get_handler_name()

    def gen():
        with region():
            yield np.ones(BIG)
            yield np.ones(BIG)

    g = gen()
    first = next(g)
    with region():
        second = next(g)
    # the generator's block is still open: depth 1, and its handler still installed
    assert resizealloc.region_depth() == 1
    assert get_handler_name() == HANDLER
    with pytest.raises(StopIteration):
        next(g)
    assert resizealloc.region_depth() == 0
    assert get_handler_name() == base
    assert owns(first) and owns(second)


def test_threads_arrays_follow_their_own_region():
    results = {}

    def worker(inside):
        if inside:
            with region():
                a = np.ones(BIG)
        else:
            a = np.ones(BIG)
        results[inside] = owns(a)

    ts = [threading.Thread(target=worker, args=(flag,)) for flag in (True, False)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results == {True: True, False: False}


def test_region_in_a_copied_context_leaves_the_outer_context_alone():
    # NumPy keeps the handler in a context variable: a block run in a copied context (as
    # asyncio tasks are) installs and restores it there only.
    import contextvars

    base = get_handler_name()
    ctx = contextvars.copy_context()

    def in_ctx():
        with region():
            a = np.ones(BIG)
        return owns(a), get_handler_name()

    got = ctx.run(in_ctx)
    assert got == (True, base)
    assert get_handler_name() == base


def test_kept_handler_stays_between_regions_and_forwards_outside_them():
    # keep_numpy_handler() installs the wrapper for good in the calling context (a copied one
    # here, so the other tests keep NumPy's own handler): regions then set nothing, and arrays
    # made outside them come from the wrapped handler, not the arena.
    import contextvars

    base = get_handler_name()

    def in_ctx():
        assert resizealloc.keep_numpy_handler()
        kept = get_handler_name()
        outside = np.ones(BIG)
        with region():
            inside = np.arange(BIG, dtype=np.float64) * 2.0
            during = get_handler_name()
        after = get_handler_name()
        assert resizealloc.keep_numpy_handler()  # idempotent: no wrapper of the wrapper
        served = owns(inside)
        inside.resize(2 * BIG, refcheck=False)  # realloc of an arena block, outside the region
        return kept, during, after, owns(outside), served, float(inside[BIG - 1]), float(inside[BIG])

    got = contextvars.copy_context().run(in_ctx)
    assert got == (HANDLER, HANDLER, HANDLER, False, True, 2.0 * (BIG - 1), 0.0)
    assert get_handler_name() == base  # the outer context never saw it


def test_keep_numpy_handler_without_numpy():
    from conftest import run_py

    # NumPy not imported: nothing to keep, and no import behind the caller's back.
    p = run_py("""
        import sys, resizealloc
        print(resizealloc.keep_numpy_handler(), "numpy" in sys.modules)
    """)
    assert p.stdout.split() == ["False", "False"], p.stdout + p.stderr


def test_small_arrays_in_a_fresh_process():
    from conftest import run_py

    p = run_py("""
        import numpy as np, resizealloc
        owns = lambda a: resizealloc._native._owns(a.ctypes.data)
        before = resizealloc.stats().thread.region_allocs
        for step in range(200):
            with resizealloc.region():
                a = np.ones(128)            # 1 KiB
                b = np.concatenate((a, a))  # 2 KiB
                c = b[::2] * 3.0
                assert owns(a) and owns(b) and owns(c), step
                total = float(c.sum())
        assert total == 384.0
        assert resizealloc.stats().thread.region_allocs >= before + 600
        print("ok")
    """)
    assert p.stdout.strip() == "ok"
