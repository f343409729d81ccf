/* fake_libcuda.c: a stand-in for libcuda.so.1 that implements the few driver calls the pool and
 * its hooks use, with host memory, and counts them. Built by the tests with -Wl,-Bsymbolic (as
 * the real driver is), so the table cuGetProcAddress hands out points at these functions, not at
 * interposed ones: a test that passes here passes for the right reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *CUstream;
typedef void *CUcontext;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2, CUDA_ERROR_NOT_FOUND = 500 };
enum { CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11, CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12 };

/* Two contexts: the primary context of device 0 (made current by cuInit, for simplicity), and
 * another one that stream FAKE_OTHER_STREAM belongs to. Every block remembers its context, so a
 * test can check which context a pool's segment was allocated in, and a context teardown frees
 * its blocks as the real driver does. */
static int the_context, other_context;
static __thread CUcontext current, saved[8];
static __thread int depth;
#define FAKE_OTHER_STREAM ((CUstream)0x99)
#define FAKE_BAD_STREAM ((CUstream)0xdead)
enum { CUDA_ERROR_INVALID_CONTEXT = 201, CUDA_ERROR_INVALID_HANDLE = 400 };

#define MAX_BLOCKS 4096
static struct { CUdeviceptr p; size_t n; CUcontext ctx; } blocks[MAX_BLOCKS];
static size_t used_bytes;
static size_t capacity = (size_t)1 << 30; /* FAKE_CUDA_CAPACITY overrides */

/* Counters the tests read through fake_cuda_counts(). */
static long n_alloc, n_free, n_sync, n_alloc_async, n_free_async, n_pool_alloc;
static int initialised;
static int primary_refs; /* references to the primary context of device 0 */

void fake_cuda_counts(long out[6]) {
    out[0] = n_alloc; out[1] = n_free; out[2] = n_sync; out[3] = n_alloc_async; out[4] = n_free_async;
    out[5] = n_pool_alloc;
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    const char *cap = getenv("FAKE_CUDA_CAPACITY");
    if (cap) capacity = strtoull(cap, NULL, 10);
    if (!initialised) primary_refs = 1;
    initialised = 1;
    current = &the_context;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *ctx) { *ctx = current; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(int *dev) { if (!current) return CUDA_ERROR_INVALID_CONTEXT; *dev = 0; return CUDA_SUCCESS; }
CUresult cuCtxPushCurrent_v2(CUcontext ctx) { if (depth == 8) return CUDA_ERROR_INVALID_VALUE; saved[depth++] = current; current = ctx; return CUDA_SUCCESS; }
CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx) *ctx = current;
    current = saved[--depth];
    return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream s, CUcontext *ctx) {
    if (s == FAKE_BAD_STREAM) return CUDA_ERROR_INVALID_HANDLE;
    *ctx = s == FAKE_OTHER_STREAM ? (CUcontext)&other_context : current;
    return CUDA_SUCCESS;
}
CUcontext fake_cuda_block_ctx(CUdeviceptr p) {
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (blocks[i].p && p >= blocks[i].p && p < blocks[i].p + blocks[i].n) return blocks[i].ctx;
    return NULL;
}
CUcontext fake_cuda_context(int which) { return which ? (CUcontext)&other_context : (CUcontext)&the_context; }
static void free_context_blocks(CUcontext ctx) {
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (blocks[i].p && blocks[i].ctx == ctx) {
            free((void *)(uintptr_t)blocks[i].p);
            used_bytes -= blocks[i].n;
            blocks[i].p = 0; blocks[i].n = 0; blocks[i].ctx = NULL;
        }
}
CUresult cuCtxDestroy_v2(CUcontext ctx) {
    if (ctx != (CUcontext)&other_context && ctx != (CUcontext)&the_context) return CUDA_ERROR_INVALID_VALUE;
    free_context_blocks(ctx);
    return CUDA_SUCCESS;
}
/* The primary context of device 0 is the_context; a reset frees its memory (the handle stays
 * the same here, which the real driver may also do). */
/* cuInit holds one reference (as cudart would); the release that drops the count to zero
 * destroys the context's memory. */
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    if (dev != 0) return CUDA_ERROR_INVALID_VALUE;
    *flags = 0; *active = primary_refs > 0; return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, int dev) {
    if (dev != 0) return CUDA_ERROR_INVALID_VALUE;
    primary_refs++; *ctx = &the_context; return CUDA_SUCCESS;
}
static void free_context_blocks(CUcontext ctx);
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    if (dev != 0 || primary_refs == 0) return CUDA_ERROR_INVALID_VALUE;
    if (--primary_refs == 0) free_context_blocks(&the_context);
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream s) { return s == FAKE_BAD_STREAM ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS; }
CUresult cuMemPoolSetAccess(void *pool, const void *map, size_t count) { (void)map; (void)count; return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
long n_reset;
CUresult cuDevicePrimaryCtxReset_v2(int dev) {
    if (dev != 0) return CUDA_ERROR_INVALID_VALUE;
    n_reset++;
    free_context_blocks(&the_context);
    return CUDA_SUCCESS;
}
long fake_cuda_resets(void) { return n_reset; }

static CUresult do_alloc(CUdeviceptr *dptr, size_t n) {
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (!dptr || n == 0) return CUDA_ERROR_INVALID_VALUE;
    if (n > capacity - used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < MAX_BLOCKS; i++) {
        if (blocks[i].p == 0) {
            void *m = aligned_alloc(256, (n + 255) & ~(size_t)255);
            if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
            blocks[i].p = (CUdeviceptr)(uintptr_t)m; blocks[i].n = n; blocks[i].ctx = current;
            used_bytes += n;
            *dptr = blocks[i].p;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult do_free(CUdeviceptr p) {
    for (int i = 0; i < MAX_BLOCKS; i++) {
        if (blocks[i].p == p && p != 0) {
            free((void *)(uintptr_t)p);
            used_bytes -= blocks[i].n;
            blocks[i].p = 0; blocks[i].n = 0; blocks[i].ctx = NULL;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) { n_alloc++; return do_alloc(dptr, n); }
CUresult cuMemFree_v2(CUdeviceptr p) { n_free++; return do_free(p); }
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s) {
    if (s == FAKE_BAD_STREAM) return CUDA_ERROR_INVALID_HANDLE;
    n_alloc_async++;
    if (s != FAKE_OTHER_STREAM) return do_alloc(dptr, n);
    CUresult r = cuCtxPushCurrent_v2(&other_context);
    if (r == CUDA_SUCCESS) { r = do_alloc(dptr, n); cuCtxPopCurrent_v2(NULL); }
    return r;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; n_free_async++; return do_free(p); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s) { return cuMemAllocAsync(dptr, n, s); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, s); }
CUresult cuCtxSynchronize(void) { if (!current) return CUDA_ERROR_INVALID_CONTEXT; n_sync++; return CUDA_SUCCESS; }

/* Memory pools: a pool is a small heap object; CUmemPoolProps is only read for handleTypes. */
typedef struct { int allocType; int handleTypes; int loc_type; int loc_id; } FakePoolProps;
CUresult cuMemPoolCreate(void **pool, const FakePoolProps *props) {
    if (!pool || !props) return CUDA_ERROR_INVALID_VALUE;
    *pool = malloc(16);
    return CUDA_SUCCESS;
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, void *pool, CUstream s) {
    (void)pool; (void)s; n_pool_alloc++; return do_alloc(dptr, n);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, void *pool, CUstream s) {
    return cuMemAllocFromPoolAsync(dptr, n, pool, s);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    for (int i = 0; i < MAX_BLOCKS; i++) {
        if (blocks[i].p && p >= blocks[i].p && p < blocks[i].p + blocks[i].n) {
            if (base) *base = blocks[i].p;
            if (size) *size = blocks[i].n;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    CUdeviceptr base; size_t size;
    CUresult r = cuMemGetAddressRange_v2(&base, &size, p);
    if (r) return r;
    if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) { *(CUdeviceptr *)data = base; return CUDA_SUCCESS; }
    if (attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE) { *(size_t *)data = size; return CUDA_SUCCESS; }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuPointerGetAttributes(unsigned count, int *attrs, void **data, CUdeviceptr p) {
    if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        if (!data[i]) continue;
        if (attrs[i] == 1) { *(unsigned *)data[i] = 2; continue; } /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE: device */
        CUresult r = cuPointerGetAttribute(data[i], attrs[i], p);
        if (r) return r;
    }
    return CUDA_SUCCESS;
}

/* The driver's entry-point table: base names, as cudart >= 12 and cuda-python ask for them. */
static const struct { const char *name; void *fn; } table[] = {
    {"cuInit", (void *)cuInit},
    {"cuCtxGetCurrent", (void *)cuCtxGetCurrent},
    {"cuCtxGetDevice", (void *)cuCtxGetDevice},
    {"cuCtxDestroy", (void *)cuCtxDestroy_v2},
    {"cuDevicePrimaryCtxReset", (void *)cuDevicePrimaryCtxReset_v2},
    {"cuPointerGetAttributes", (void *)cuPointerGetAttributes},
    {"cuStreamGetCtx", (void *)cuStreamGetCtx},
    {"cuStreamDestroy", (void *)cuStreamDestroy_v2},
    {"cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease_v2},
    {"cuMemPoolSetAccess", (void *)cuMemPoolSetAccess},
    {"cuMemAlloc", (void *)cuMemAlloc_v2},
    {"cuMemFree", (void *)cuMemFree_v2},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync},
    {"cuCtxSynchronize", (void *)cuCtxSynchronize},
    {"cuMemGetAddressRange", (void *)cuMemGetAddressRange_v2},
    {"cuPointerGetAttribute", (void *)cuPointerGetAttribute},
    {"cuMemPoolCreate", (void *)cuMemPoolCreate},
    {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync},
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    (void)version;
    int ptds = (flags & 2) != 0; /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(symbol, table[i].name) == 0) {
            *pfn = table[i].fn;
            if (ptds && !strcmp(symbol, "cuMemAllocAsync")) *pfn = (void *)cuMemAllocAsync_ptsz;
            if (ptds && !strcmp(symbol, "cuMemFreeAsync")) *pfn = (void *)cuMemFreeAsync_ptsz;
            if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SUCCESS */
            return CUDA_SUCCESS;
        }
    }
    *pfn = NULL;
    if (status) *status = 2; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
