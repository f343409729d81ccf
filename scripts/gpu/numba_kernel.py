# Numba: a kernel on arrays from libresizealloc.so through an external memory manager (argument
# "resize"; RESIZEALLOC_LIB names the library), or from Numba's own allocator. The python/
# package has the real plugin; this minimal one is for the GPU check only.
import ctypes, sys, time
from gpu_env import first_device_call, need, no_device, resize_lib

np = need("numpy", "numpy")
cuda = need("numba.cuda", "numba-cuda")

mode = sys.argv[1] if len(sys.argv) > 1 else "numba"
# The driver, without a context (the memory manager must be set before one is created).
if not first_device_call("numba.cuda.is_available()", cuda.is_available):
    no_device("numba.cuda.is_available()", getattr(cuda, "cuda_error", lambda: None)() or "no CUDA driver or device")
if mode == "resize":
    from numba.cuda import HostOnlyCUDAMemoryManager, MemoryPointer, GetIpcHandleMixin
    from numba.cuda.cudadrv import driver as numba_driver
    lib = resize_lib()
    lib.resize_device_allocate.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.resize_device_deallocate.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    libcuda = ctypes.CDLL("libcuda.so.1")

    class ResizeEMM(GetIpcHandleMixin, HostOnlyCUDAMemoryManager):
        def initialize(self):
            super().initialize()
        def memalloc(self, size):
            dev = self.context.device.id
            out = ctypes.c_void_p()
            r = lib.resize_device_allocate(size, dev, None, ctypes.byref(out))
            if r:
                raise MemoryError("resize_device_allocate: CUDA error %d" % r)
            ptr = out.value
            def finalizer():
                lib.resize_device_deallocate(ptr, size, dev, None)
            if getattr(numba_driver, "USE_NV_BINDING", False):
                from cuda import cuda as binding
                handle = binding.CUdeviceptr(ptr)
            else:
                handle = ctypes.c_uint64(ptr)
            return MemoryPointer(self.context, handle, size, finalizer=finalizer)
        def get_memory_info(self):
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            libcuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
            return free.value, total.value
        @property
        def interface_version(self):
            return 1
    cuda.set_memory_manager(ResizeEMM)

@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

n = 1 << 20
x = np.arange(n, dtype=np.float32)
y = np.ones(n, dtype=np.float32)
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
dx, dy = cuda.to_device(x), cuda.to_device(y)
for _ in range(10):
    out = cuda.device_array(n, dtype=np.float32); axpy[n // 256, 256](2.0, dx, dy, out); del out
cuda.synchronize()
t = time.perf_counter()
for _ in range(steps):
    out = cuda.device_array(n, dtype=np.float32)
    axpy[n // 256, 256](2.0, dx, dy, out)
    res = out
cuda.synchronize()
dt = (time.perf_counter() - t) / steps
assert np.allclose(res.copy_to_host(), 2.0 * x + y), "wrong kernel result"
print("RESULT numba_axpy_step_%s %.1f us" % (mode, dt * 1e6))
