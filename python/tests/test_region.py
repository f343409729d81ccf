"""region(): markers, nesting, exceptions, decorators, generators, threads, bad input."""
import ctypes
import threading

import pytest

import resizealloc
from resizealloc import region, region_begin, region_depth, region_end


def test_not_preloaded_here():
    assert resizealloc.preloaded() is False
    assert resizealloc.preloaded_path() is None


def test_nesting_depth():
    assert region_depth() == 0
    with region() as r:
        assert region_depth() == 1
        with region():
            assert region_depth() == 2
        assert region_depth() == 1
        assert r is region()  # stateless: one object serves every block
    assert region_depth() == 0


def test_markers_and_unbalanced_end():
    region_begin()
    region_begin()
    assert region_depth() == 2
    region_end()
    region_end()
    assert region_depth() == 0
    with pytest.raises(RuntimeError, match="without a matching region_begin"):
        region_end()
    assert region_depth() == 0  # the interpreter goes on, and regions still work
    with region():
        assert region_depth() == 1


def test_exit_of_a_region_ended_by_hand_raises():
    with pytest.raises(RuntimeError, match="without a matching region_begin"):
        with region():
            region_end()
    assert region_depth() == 0


def test_exception_inside_block_ends_region():
    with pytest.raises(KeyError):
        with region():
            with region():
                raise KeyError("x")
    assert region_depth() == 0


def test_decorator_forms():
    @region
    def f(x):
        return region_depth() + x

    @region()
    def g(x):
        return region_depth() * 10 + x

    assert f(1) == 2 and g(1) == 11
    assert f.__name__ == "f" and g.__name__ == "g"
    assert region_depth() == 0


def test_decorated_generator_and_coroutine():
    @region
    def gen():
        yield region_depth()
        yield region_depth()

    assert list(gen()) == [1, 1]
    assert region_depth() == 0

    import asyncio

    @region
    async def co():
        await asyncio.sleep(0)
        return region_depth()

    assert asyncio.run(co()) == 1
    assert region_depth() == 0


def test_generator_suspended_inside_block():
    def gen():
        with region():
            data = [bytes(1000 + i) for i in range(10)]
            yield len(data)
            yield region_depth()

    g = gen()
    assert next(g) == 10
    assert region_depth() == 1  # the thread is still inside the generator's region
    with region():
        assert region_depth() == 2
        assert next(g) == 2
    # the generator's block is still open (suspended in it); the caller's block ended
    assert region_depth() == 1
    with pytest.raises(StopIteration):
        next(g)
    assert region_depth() == 0


def test_generator_closed_inside_block():
    def gen():
        with region():
            yield 1
            yield 2

    g = gen()
    next(g)
    assert region_depth() == 1
    g.close()  # GeneratorExit runs __exit__
    assert region_depth() == 0


def test_threads_have_their_own_regions():
    seen = {}
    go = threading.Event()

    def worker(name, n):
        with region():
            for _ in range(n):
                region_begin()
            seen[name] = region_depth()
            go.wait(5)
            for _ in range(n):
                region_end()
            seen[name + "_after"] = region_depth()
        seen[name + "_end"] = region_depth()
        with pytest.raises(RuntimeError):
            region_end()
        seen[name + "_raised"] = True

    with region():
        ts = [threading.Thread(target=worker, args=("t%d" % i, i)) for i in range(3)]
        for t in ts:
            t.start()
        go.set()
        for t in ts:
            t.join()
        assert region_depth() == 1
    for i in range(3):
        assert seen["t%d" % i] == i + 1
        assert seen["t%d_after" % i] == 1
        assert seen["t%d_end" % i] == 0
        assert seen["t%d_raised" % i]


def test_stats_dataclass_and_trim():
    with region():
        blob = [bytes(4096) for _ in range(64)]
        inside = resizealloc.stats()
    del blob
    s = resizealloc.stats()
    assert isinstance(s, resizealloc.Stats)
    assert inside.thread.region_depth == 1 and s.thread.region_depth == 0
    assert s.thread.region_allocs >= inside.thread.region_allocs >= 64
    assert s.process.arenas_live >= 1
    assert s.process.reserved_bytes > 0
    assert 0 <= s.memory.efficiency_permille <= 1000
    resizealloc.trim()
    after = resizealloc.stats()
    assert after.memory.thread_resident <= s.memory.thread_resident


def test_stats_small_heap_section(lib_path):
    """``stats().small``: the preloaded library's small-block heap, which process mode fills
    with requests of up to 1 KiB (600-byte bytearrays pass pymalloc's 512-byte limit)."""
    from conftest import run_py

    p = run_py(
        """
        import resizealloc
        xs = [bytearray(600) for _ in range(10000)]
        s = resizealloc.stats()
        assert isinstance(s.small, resizealloc.SmallStats)
        assert s.small.pages_in_use >= 1 and s.small.bytes_in_pages >= 65536, s.small
        print("small", s.small.pages_in_use, len(xs))
        """,
        env_extra={"RESIZEALLOC_REGION": "process"},
        preload=lib_path,
    )
    assert p.stdout.startswith("small ")


def test_raw_objects_come_from_the_arena():
    before = resizealloc.stats().thread.region_allocs
    with region():
        big = bytes(100_000)  # pymalloc sends objects over 512 bytes to the raw domain
        items = [0] * 200  # a list's item array: 1.6 KiB
        inside = resizealloc._native._owns(id(big))
    assert resizealloc._native.raw_wrapper_installed()
    assert inside is True
    assert len(items) == 200
    outside = bytes(100_000)
    assert resizealloc._native._owns(id(outside)) is False
    assert resizealloc.stats().thread.region_allocs > before
    assert big == bytes(100_000)  # escaped object intact
    del big, outside


def test_raw_blocks_freed_and_grown_on_other_threads():
    # 1 MiB and more: the arena keeps such requests whatever its lifetime predictor learned
    # from the escapes of the tests before (smaller sizes are checked in test_numpy's fresh
    # process and test_chain).
    sizes = [(1 << 20) + 1000 * i for i in range(10)]
    with region():
        blobs = [bytearray(b"%d" % (i % 10)) * n for i, n in enumerate(sizes)]
        addrs = [ctypes.addressof((ctypes.c_char * len(b)).from_buffer(b)) for b in blobs]
    # bytearray buffers over 512 bytes come from the raw domain, so from the arena
    assert all(resizealloc._native._owns(a) for a in addrs)
    out = []

    def other():
        for b in blobs:
            b.extend(b"y" * 5000)  # realloc of an arena block on another thread, outside a region
        out.append((sum(len(b) for b in blobs), [b[0] for b in blobs], [b[-1] for b in blobs]))
        blobs.clear()  # frees on another thread

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert out == [(sum(sizes) + 5000 * 10, [ord(b"%d" % i) for i in range(10)], [ord("y")] * 10)]
