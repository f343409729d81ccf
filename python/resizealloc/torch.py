"""PyTorch: CUDA tensors from resizealloc's device pools.

    import resizealloc.torch
    resizealloc.torch.use()        # before the first CUDA allocation of the process

``use()`` installs ``torch.cuda.memory.CUDAPluggableAllocator(libresizealloc.so,
"resize_torch_alloc", "resize_torch_free")`` with ``change_current_allocator``. PyTorch accepts
this only before its caching allocator has served anything. Importing this module does not
import torch.
"""
from __future__ import annotations

from typing import Any, Optional

from ._lib import library_path, load, require

ALLOC = "resize_torch_alloc"
FREE = "resize_torch_free"


def use(path: Optional[str] = None) -> Any:
    """Makes libresizealloc.so PyTorch's CUDA allocator; returns the pluggable allocator."""
    torch = require("torch", "PyTorch")
    path = path or library_path()
    load(path, (ALLOC, FREE))
    alloc = torch.cuda.memory.CUDAPluggableAllocator(path, ALLOC, FREE)
    torch.cuda.memory.change_current_allocator(alloc)
    return alloc
