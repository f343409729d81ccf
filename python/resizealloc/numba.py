"""Numba: an External Memory Management (EMM) plugin over resizealloc's device pools.

    NUMBA_CUDA_MEMORY_MANAGER=resizealloc.numba python app.py
or
    from numba import cuda
    import resizealloc.numba
    cuda.set_memory_manager(resizealloc.numba.ResizeMemoryManager)

Device allocations call ``resize_device_allocate`` / ``resize_device_deallocate`` (ctypes);
host allocations stay Numba's (``HostOnlyCUDAMemoryManager``). The class is made on first
access (PEP 562), so importing this module does not import Numba.
"""
from __future__ import annotations

import ctypes
from typing import Any

from ._lib import require
from .cuda_core import functions

_cls: Any = None


def _make_class() -> Any:
    cuda = require("numba.cuda", "Numba")
    driver = require("numba.cuda.cudadrv.driver", "Numba")

    class ResizeMemoryManager(cuda.HostOnlyCUDAMemoryManager):
        """Numba EMM plugin: device memory from libresizealloc.so."""

        def initialize(self) -> None:
            self._alloc, self._dealloc = functions()

        def memalloc(self, size: int) -> Any:
            device = self.context.device.id
            out = ctypes.c_void_p()
            rc = self._alloc(size, device, None, ctypes.byref(out))
            if rc != 0:
                raise MemoryError("resize_device_allocate(%d) failed: CUDA error %d" % (size, rc))
            ptr = out.value or 0
            dealloc = self._dealloc

            def finalizer() -> None:
                dealloc(ptr, size, device, None)

            if getattr(driver, "USE_NV_BINDING", False):
                handle = driver.binding.CUdeviceptr(ptr)
            else:
                handle = driver.drvapi.cu_device_ptr(ptr)
            return driver.MemoryPointer(self.context, handle, size, finalizer=finalizer)

        def get_memory_info(self) -> Any:
            if getattr(driver, "USE_NV_BINDING", False):
                free, total = driver.driver.cuMemGetInfo()
            else:
                f, t = ctypes.c_size_t(), ctypes.c_size_t()
                driver.driver.cuMemGetInfo(ctypes.byref(f), ctypes.byref(t))
                free, total = f.value, t.value
            return cuda.MemoryInfo(free=free, total=total)

        def get_ipc_handle(self, memory: Any) -> Any:
            raise NotImplementedError("resizealloc.numba: IPC handles of pool blocks are not supported")

        @property
        def interface_version(self) -> int:
            return 1

    return ResizeMemoryManager


def __getattr__(name: str) -> Any:
    global _cls
    if name in ("ResizeMemoryManager", "_numba_memory_manager"):
        if _cls is None:
            _cls = _make_class()
        return _cls
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
