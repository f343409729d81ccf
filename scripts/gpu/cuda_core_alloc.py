# cuda.core: DeviceMemoryResource.allocate(10) + close + device sync: the loop of a program that allocates a small buffer per step and synchronises.
import sys, time
try:
    from cuda.core.experimental import Device
except ImportError:
    from cuda.core import Device
dev = Device()
dev.set_current()
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
