"""cuda.core: a ``MemoryResource`` over resizealloc's device pools.

    from resizealloc.cuda_core import memory_resource
    mr = memory_resource(device_id=0)
    buf = mr.allocate(1 << 20, stream=stream)
    buf.close(stream)

The resource calls ``int resize_device_allocate(size_t size, int device, void *stream, void
**out)`` and ``int resize_device_deallocate(void *ptr, size_t size, int device, void *stream)``
(0 on success, a CUDA error code otherwise) through ctypes. The class is made on first use, so
importing this module does not import cuda.core.
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional

from ._lib import load, require

ALLOCATE = "resize_device_allocate"
DEALLOCATE = "resize_device_deallocate"
_cls: Any = None


def _core():
    try:
        return require("cuda.core.experimental", "cuda.core (cuda-python)")
    except ImportError:
        return require("cuda.core", "cuda.core (cuda-python)")


def stream_handle(stream: Any) -> int:
    """The CUstream of ``stream`` as an integer: None is the default stream (0); objects with
    ``.handle`` (cuda.core ``Stream``), integers, or ``__cuda_stream__`` providers."""
    if stream is None:
        return 0
    if hasattr(stream, "__cuda_stream__"):
        _, h = stream.__cuda_stream__()
        return int(h)
    h = getattr(stream, "handle", stream)
    return int(h)


def functions(path: Optional[str] = None):
    """(allocate, deallocate) as typed ctypes functions."""
    lib = load(path, (ALLOCATE, DEALLOCATE))
    alloc = lib[ALLOCATE]
    alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    alloc.restype = ctypes.c_int
    dealloc = lib[DEALLOCATE]
    dealloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    dealloc.restype = ctypes.c_int
    return alloc, dealloc


def _make_class(core: Any) -> Any:
    Buffer = core.Buffer

    class ResizeMemoryResource(core.MemoryResource):
        """Device memory from libresizealloc.so's pool of ``device_id``."""

        def __init__(self, device_id: int = 0, path: Optional[str] = None):
            self._device_id = int(device_id)
            self._alloc, self._dealloc = functions(path)

        def allocate(self, size: int, stream: Any = None) -> Any:
            out = ctypes.c_void_p()
            rc = self._alloc(size, self._device_id, stream_handle(stream), ctypes.byref(out))
            if rc != 0:
                if rc == 2:  # cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY
                    raise MemoryError("resize_device_allocate(%d): out of device memory" % size)
                raise RuntimeError("resize_device_allocate(%d) failed: CUDA error %d" % (size, rc))
            ptr = out.value or 0
            if hasattr(Buffer, "from_handle"):
                return Buffer.from_handle(ptr, size, mr=self)
            return Buffer._init(ptr, size, self)

        def deallocate(self, ptr: Any, size: int, stream: Any = None) -> None:
            rc = self._dealloc(int(ptr), size, self._device_id, stream_handle(stream))
            if rc != 0:
                raise RuntimeError("resize_device_deallocate failed: CUDA error %d" % rc)

        @property
        def is_device_accessible(self) -> bool:
            return True

        @property
        def is_host_accessible(self) -> bool:
            return False

        @property
        def device_id(self) -> int:
            return self._device_id

    return ResizeMemoryResource


def memory_resource(device_id: int = 0, path: Optional[str] = None) -> Any:
    """A ``cuda.core`` MemoryResource backed by libresizealloc.so's device pool."""
    global _cls
    if _cls is None:
        _cls = _make_class(_core())
    return _cls(device_id, path)
