# cuda.core: DeviceMemoryResource.allocate(10) + close + device sync: the loop of a program that allocates a small buffer per step and synchronises.
import sys, time
from gpu_env import first_device_call, need_any

core = need_any(["cuda.core.experimental", "cuda.core"], "cuda-core")
Device = core.Device


def open_device():
    d = Device()
    d.set_current()
    return d


dev = first_device_call("cuda.core Device().set_current()", open_device)
mr = dev.memory_resource
n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
for _ in range(50):
    mr.allocate(10).close(); dev.sync()
t = time.perf_counter()
for _ in range(n):
    buf = mr.allocate(10)
    buf.close()
    dev.sync()
print("RESULT cuda_core_alloc_sync %.1f ns" % ((time.perf_counter() - t) / n * 1e9))
