"""CuPy: device memory from resizealloc's device pools.

    import resizealloc.cupy
    resizealloc.cupy.use()

``use()`` sets ``cupy.cuda.set_allocator`` to a ``cupy.cuda.memory.CFunctionAllocator`` over
``resize_cupy_malloc(void *param, size_t size, int device)`` and
``resize_cupy_free(void *param, void *ptr, int device)``. Importing this module does not import
CuPy.
"""
from __future__ import annotations

from typing import Any, Optional

from ._lib import function_address, load, require

MALLOC = "resize_cupy_malloc"
FREE = "resize_cupy_free"


def use(path: Optional[str] = None) -> Any:
    """Makes libresizealloc.so CuPy's device allocator; returns the CFunctionAllocator."""
    cupy = require("cupy", "CuPy")
    lib = load(path, (MALLOC, FREE))
    alloc = cupy.cuda.memory.CFunctionAllocator(
        0, function_address(lib, MALLOC), function_address(lib, FREE), lib
    )
    cupy.cuda.set_allocator(alloc.malloc)
    return alloc
