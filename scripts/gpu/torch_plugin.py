# torch_loop.py with libresizealloc.so as PyTorch's allocator through CUDAPluggableAllocator
# (no LD_PRELOAD): RESIZEALLOC_LIB names the library. Same output lines as torch_loop.py.
import os, runpy, sys
from gpu_env import need, no_device, resize_lib

torch = need("torch", "torch")
lib = resize_lib()._name
# The allocator must be set before CUDA is initialised: ask for a device without a context.
if not torch.cuda.is_available():
    no_device("torch.cuda.is_available()", "False (no CUDA driver or device, or a CPU-only torch)")
alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "resize_torch_alloc", "resize_torch_free")
torch.cuda.memory.change_current_allocator(alloc)
sys.argv = [os.path.join(os.path.dirname(__file__), "torch_loop.py")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
