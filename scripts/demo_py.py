# A Python batch job whose steps make large temporaries: each step normalises a 40 MiB buffer
# (bytes.translate: a 40 MiB copy), cuts it into 4 MiB blocks and upper-cases four of them.
# glibc serves the 40 MiB copy with a fresh mmap each time (it is above glibc's 32 MiB mmap
# ceiling), so its pages fault in again at every step.
#
# When libresizealloc.so is in the process, each step is a region, marked through ctypes, so
# the temporaries come from the thread's arena, which keeps its memory from step to step.
# With --no-markers the script is left unmodified (for RESIZEALLOC_REGION=process).
# Prints the time per step, a checksum that must not depend on the allocator, the peak RSS and
# how the regions were set up.
import ctypes
import os
import sys
import time

MIB = 1 << 20
STEPS = 12

lib = ctypes.CDLL(None)  # the process's own symbols: the library's C API if it is preloaded
begin = getattr(lib, "resize_region_begin", None)
end = getattr(lib, "resize_region_end", None)
depth = getattr(lib, "resize_region_depth", None)
use_markers = begin is not None and "--no-markers" not in sys.argv
if use_markers:
    regions = "marked"
elif depth is None:
    regions = "unavailable (plain malloc)"
elif os.environ.get("RESIZEALLOC_REGION") == "process":
    regions = "process (RESIZEALLOC_REGION=process)"
else:
    regions = "unmarked"

blob = bytes(range(256)) * (40 * MIB // 256)
TABLE = bytes.maketrans(b"abcdefgh", b"ABCDEFGH")


def step(k):
    normal = blob.translate(TABLE)
    blocks = [normal[i : i + 4 * MIB] for i in range(0, len(normal), 4 * MIB)]
    upper = [b.upper() for b in blocks[:4]]
    return sum(b.count(b"A") for b in blocks) + sum(u.count(b"B") for u in upper) + k


t = time.perf_counter()
checksum = 0
for k in range(STEPS):
    if use_markers:
        begin()
    checksum += step(k)
    if use_markers:
        end()
ms = (time.perf_counter() - t) * 1000 / STEPS


def peak_rss_kib():
    """VmHWM: the peak resident set of this process image (0 without /proc)."""
    try:
        with open("/proc/self/status") as f:
            return next((int(l.split()[1]) for l in f if l.startswith("VmHWM:")), 0)
    except OSError:
        return 0


print(
    "demo_py: %d steps, %.2f ms per step, checksum %d, peak RSS %d KiB, regions %s"
    % (STEPS, ms, checksum, peak_rss_kib(), regions)
)
