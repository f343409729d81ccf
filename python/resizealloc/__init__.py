"""resizealloc for Python: ``with resizealloc.region():`` serves the block's temporaries from the
calling thread's resize arena.

Without ``LD_PRELOAD``, NumPy array data (through NumPy's memory handler, NEP 49) and Python's
raw allocations (objects over 512 bytes, through ``PyMem_SetAllocator``) come from the arenas of
this package's native extension. Where ``libresizealloc.so`` is preloaded, ``region()`` calls
that library's markers instead, and everything ``malloc`` serves goes to its arenas.

Regions are per thread and nest, like the C markers. Memory handed out inside a region stays
valid after it: objects and arrays may escape the block, be freed on any thread, or later.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, fields
from typing import Any, Callable, TypeVar

from . import _native
from ._native import (
    keep_numpy_handler,
    preloaded,
    preloaded_path,
    region,
    region_begin,
    region_depth,
    region_end,
    trim,
)

__all__ = [
    "region",
    "region_begin",
    "region_end",
    "region_depth",
    "stats",
    "trim",
    "preloaded",
    "preloaded_path",
    "keep_numpy_handler",
    "Stats",
    "ThreadStats",
    "ProcessStats",
    "MemoryStats",
    "SmallStats",
]
__version__ = "0.1.0"

F = TypeVar("F", bound=Callable[..., Any])


def _decorate(func: F) -> F:
    """Runs every call of ``func`` in a region; a generator function's body and a coroutine's
    body run in one region each (for a generator, the region is open while it runs, and stays
    open on the thread while it is suspended inside)."""
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
            with region():
                return (yield from func(*args, **kwargs))

        return gen_wrapper  # type: ignore[return-value]
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def coro_wrapper(*args: Any, **kwargs: Any) -> Any:
            with region():
                return await func(*args, **kwargs)

        return coro_wrapper  # type: ignore[return-value]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with region():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


_native._set_decorator(_decorate)


@dataclass(frozen=True)
class ThreadStats:
    """The calling thread's arena (see the Stats table of docs/reference.md)."""

    arena_capacity: int
    arena_committed: int
    high_water: int
    region_allocs: int
    overflow_allocs: int
    spilled_allocs: int
    resizes: int
    region_depth: int


@dataclass(frozen=True)
class ProcessStats:
    """Totals over every thread's arena."""

    arena_capacity: int
    arena_committed: int
    high_water: int
    region_allocs: int
    overflow_allocs: int
    spilled_allocs: int
    resizes: int
    arenas_live: int
    arenas_orphaned: int
    arenas_denied: int
    reserved_bytes: int


@dataclass(frozen=True)
class MemoryStats:
    """The memory bound and the lifetime predictor."""

    thread_resident: int
    thread_live: int
    process_resident: int
    process_live: int
    efficiency_permille: int
    granules_given_back: int
    bound_closures: int
    bytes_turned_away: int
    bytes_routed_away: int
    sites_learned_long: int
    sites_learned_short: int
    sites_long_now: int


@dataclass(frozen=True)
class SmallStats:
    """The small-block heap (process mode's home for requests of up to 1 KiB)."""

    pages_in_use: int
    bytes_in_pages: int
    pages_given_back: int
    pages_adopted: int


@dataclass(frozen=True)
class Stats:
    """``thread``: the calling thread's figures; ``process``: every arena's; ``memory``: the bound
    and the predictor; ``small``: the small-block heap. Where the library is preloaded these are
    its arenas, otherwise the package's own."""

    thread: ThreadStats
    process: ProcessStats
    memory: MemoryStats
    small: SmallStats


def _make(cls: type, d: dict) -> Any:
    return cls(**{f.name: int(d[f.name]) for f in fields(cls)})


def stats() -> Stats:
    """The calling thread's and the process's figures."""
    t, p, m, k = _native._stats()
    return Stats(_make(ThreadStats, t), _make(ProcessStats, p), _make(MemoryStats, m), _make(SmallStats, k))
