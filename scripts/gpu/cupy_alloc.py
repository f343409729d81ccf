# CuPy: cp.empty(10) + device sync, with CuPy's own pool or
# with libresizealloc.so through CFunctionAllocator (argument "resize"; RESIZEALLOC_LIB names
# the library). Also checks a computation on pooled memory.
import ctypes, sys, time
from gpu_env import first_device_call, need, resize_lib

cp = need("cupy", "cupy-cuda13x")
mode = sys.argv[1] if len(sys.argv) > 1 else "cupy"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
first_device_call("cupy.cuda.runtime.getDeviceCount()", cp.cuda.runtime.getDeviceCount)
if mode == "resize":
    lib = resize_lib()
    malloc = ctypes.cast(lib.resize_cupy_malloc, ctypes.c_void_p).value
    free = ctypes.cast(lib.resize_cupy_free, ctypes.c_void_p).value
    allocator = cp.cuda.memory.CFunctionAllocator(0, malloc, free, lib)
    cp.cuda.set_allocator(allocator.malloc)
dev = cp.cuda.Device()
a = cp.arange(1 << 20, dtype=cp.int64)
assert int(a.sum()) == (1 << 20) * ((1 << 20) - 1) // 2, "wrong sum"
del a
for _ in range(200):
    x = cp.empty(10, dtype=cp.uint8); del x; dev.synchronize()
t = time.perf_counter()
for _ in range(n):
    x = cp.empty(10, dtype=cp.uint8)
    del x
    dev.synchronize()
print("RESULT cupy_empty10_sync_%s %.1f ns" % (mode, (time.perf_counter() - t) / n * 1e9))
