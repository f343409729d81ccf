# torch_loop.py with libresizealloc.so as PyTorch's allocator through CUDAPluggableAllocator
# (no LD_PRELOAD): RESIZEALLOC_LIB names the library. Same output lines as torch_loop.py.
import os, runpy, sys
import torch

lib = os.environ["RESIZEALLOC_LIB"]
alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "resize_torch_alloc", "resize_torch_free")
torch.cuda.memory.change_current_allocator(alloc)
sys.argv = [os.path.join(os.path.dirname(__file__), "torch_loop.py")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
