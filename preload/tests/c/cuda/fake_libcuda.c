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

#define MAX_BLOCKS 4096
static struct { CUdeviceptr p; size_t n; } blocks[MAX_BLOCKS];
static size_t used_bytes;
static size_t capacity = (size_t)1 << 30; /* FAKE_CUDA_CAPACITY overrides */

/* Counters the tests read through fake_cuda_counts(). */
static long n_alloc, n_free, n_sync, n_alloc_async, n_free_async, n_pool_alloc;
static int initialised;
static int the_context;

void fake_cuda_counts(long out[6]) {
    out[0] = n_alloc; out[1] = n_free; out[2] = n_sync; out[3] = n_alloc_async; out[4] = n_free_async;
    out[5] = n_pool_alloc;
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    const char *cap = getenv("FAKE_CUDA_CAPACITY");
    if (cap) capacity = strtoull(cap, NULL, 10);
    initialised = 1;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *ctx) { *ctx = &the_context; return CUDA_SUCCESS; }

static CUresult do_alloc(CUdeviceptr *dptr, size_t n) {
    if (!dptr || n == 0) return CUDA_ERROR_INVALID_VALUE;
    if (n > capacity - used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < MAX_BLOCKS; i++) {
        if (blocks[i].p == 0) {
            void *m = aligned_alloc(256, (n + 255) & ~(size_t)255);
            if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
            blocks[i].p = (CUdeviceptr)(uintptr_t)m; blocks[i].n = n;
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
            blocks[i].p = 0; blocks[i].n = 0;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) { n_alloc++; return do_alloc(dptr, n); }
CUresult cuMemFree_v2(CUdeviceptr p) { n_free++; return do_free(p); }
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s) { (void)s; n_alloc_async++; return do_alloc(dptr, n); }
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; n_free_async++; return do_free(p); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s) { return cuMemAllocAsync(dptr, n, s); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, s); }
CUresult cuCtxSynchronize(void) { n_sync++; return CUDA_SUCCESS; }

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

/* The driver's entry-point table: base names, as cudart >= 12 and cuda-python ask for them. */
static const struct { const char *name; void *fn; } table[] = {
    {"cuInit", (void *)cuInit},
    {"cuCtxGetCurrent", (void *)cuCtxGetCurrent},
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
