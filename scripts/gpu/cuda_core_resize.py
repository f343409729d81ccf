# cuda.core: allocate(10) + close + device sync through a MemoryResource over
# resize_device_allocate/deallocate (RESIZEALLOC_LIB names the library; no LD_PRELOAD). The
# python/ package has the real class; this minimal one is for the GPU check only.
import ctypes, sys, time
from gpu_env import first_device_call, need_any, resize_lib

core = need_any(["cuda.core.experimental", "cuda.core"], "cuda-core")
Device, MemoryResource, Buffer = core.Device, core.MemoryResource, core.Buffer

lib = resize_lib()
lib.resize_device_allocate.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
lib.resize_device_deallocate.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]

def handle(stream):
    return None if stream is None else int(stream.handle)

class ResizeMR(MemoryResource):
    def __init__(self, device_id):
        self._dev = device_id
    def allocate(self, size, stream=None):
        out = ctypes.c_void_p()
        r = lib.resize_device_allocate(size, self._dev, handle(stream), ctypes.byref(out))
        if r:
            raise MemoryError("resize_device_allocate: CUDA error %d" % r)
        if hasattr(Buffer, "from_handle"):
            return Buffer.from_handle(out.value or 0, size, mr=self)
        return Buffer(out.value or 0, size, self)
    def deallocate(self, ptr, size, stream=None):
        r = lib.resize_device_deallocate(int(ptr), size, self._dev, handle(stream))
        if r:
            raise RuntimeError("resize_device_deallocate: CUDA error %d" % r)
    @property
    def is_device_accessible(self): return True
    @property
    def is_host_accessible(self): return False
    @property
    def device_id(self): return self._dev

def open_device():
    d = Device()
    d.set_current()
    return d


dev = first_device_call("cuda.core Device().set_current()", open_device)
mr = ResizeMR(dev.device_id)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
for _ in range(200):
    mr.allocate(10).close(); dev.sync()
t = time.perf_counter()
for _ in range(n):
    buf = mr.allocate(10)
    buf.close()
    dev.sync()
print("RESULT cuda_core_resize_alloc_sync %.1f ns" % ((time.perf_counter() - t) / n * 1e9))
