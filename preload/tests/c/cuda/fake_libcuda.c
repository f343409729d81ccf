/* fake_libcuda.c: a stand-in for libcuda.so.1 that implements the few driver calls the pool and
 * its hooks use, with host memory, and counts them. Built by the tests with -Wl,-Bsymbolic (as
 * the real driver is), so the table cuGetProcAddress hands out points at these functions, not at
 * interposed ones: a test that passes here passes for the right reason. */
#include <pthread.h>
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

/* Stream capture (CUDA graphs): the streams capturing now, their mode, and whether something
 * invalidated the capture. What the real driver refuses during a capture is refused here too,
 * counted in n_illegal, and invalidates the captures it concerns: a synchronisation during any
 * capture, cuMemAlloc/cuMemFree during a global (or thread-local) one. Stream-ordered calls on
 * a capturing stream become graph memory nodes (n_graph_allocs, n_graph_frees). */
enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };
enum { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901 };
#define MAX_CAPTURES 16
static struct { CUstream s; int mode; int invalid; } caps[MAX_CAPTURES];
static long n_illegal, n_graph_allocs, n_graph_frees, n_ipc, n_create, n_managed, n_host, n_capture_queries;
static int n_captures; /* entries in caps: the common case (none) costs one load */
static int capture_slot(CUstream s) {
    if (!n_captures) return -1;
    for (int i = 0; i < MAX_CAPTURES; i++) if (caps[i].s == s && s) return i;
    return -1;
}
/* 1: some capture of a mode in `modes` (bit mask) is active; it is invalidated. */
static int illegal_during(int modes) {
    int hit = 0;
    if (!n_captures) return 0;
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (caps[i].s && ((1 << caps[i].mode) & modes)) { caps[i].invalid = 1; hit = 1; }
    if (hit) n_illegal++;
    return hit;
}
#define ALL_MODES 7
#define UNSAFE_MODES ((1 << MODE_GLOBAL) | (1 << MODE_THREAD_LOCAL))
static CUresult begin_capture(CUstream s, int mode) {
    if (s == 0 || s == (CUstream)1) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* legacy stream */
    if (capture_slot(s) >= 0) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (!caps[i].s) { caps[i].s = s; caps[i].mode = mode; caps[i].invalid = 0; n_captures++; return CUDA_SUCCESS; }
    return CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuStreamBeginCapture_v2(CUstream s, int mode) { return begin_capture(s, mode); }
CUresult cuStreamBeginCapture_ptsz(CUstream s, int mode) { return begin_capture(s ? s : (CUstream)2, mode); }
/* The same, under a name no hook knows: a capture begun where the library cannot see it. */
CUresult fake_cuda_begin_capture_unseen(CUstream s, int mode) { return begin_capture(s, mode); }
CUresult cuStreamEndCapture(CUstream s, void **graph) {
    int i = capture_slot(s);
    if (i < 0) return CUDA_ERROR_INVALID_VALUE;
    int invalid = caps[i].invalid;
    caps[i].s = 0;
    n_captures--;
    if (graph) *graph = invalid ? NULL : (void *)0x6a;
    return invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}
CUresult cuStreamEndCapture_ptsz(CUstream s, void **graph) { return cuStreamEndCapture(s ? s : (CUstream)2, graph); }
static int capture_status(CUstream s) {
    int i = capture_slot(s);
    return i < 0 ? 0 : caps[i].invalid ? 2 : 1;
}
CUresult cuStreamGetCaptureInfo_v2(CUstream s, int *status, uint64_t *id, void **graph, const void **deps, size_t *n) {
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    n_capture_queries++;
    *status = capture_status(s);
    if (id) *id = (uint64_t)(uintptr_t)s;
    if (graph) *graph = NULL;
    if (deps) *deps = NULL;
    if (n) *n = 0;
    return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream s, int *status) { *status = capture_status(s); return CUDA_SUCCESS; }

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the block table, for the threaded tests */
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
long fake_cuda_count(const char *what) {
    if (!strcmp(what, "illegal")) return n_illegal;
    if (!strcmp(what, "graph_allocs")) return n_graph_allocs;
    if (!strcmp(what, "graph_frees")) return n_graph_frees;
    if (!strcmp(what, "ipc")) return n_ipc;
    if (!strcmp(what, "create")) return n_create;
    if (!strcmp(what, "managed")) return n_managed;
    if (!strcmp(what, "host")) return n_host;
    if (!strcmp(what, "syncs")) return n_sync;
    if (!strcmp(what, "allocs")) return n_alloc;
    if (!strcmp(what, "frees")) return n_free;
    if (!strcmp(what, "capture_queries")) return n_capture_queries;
    return -1;
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
CUresult cuCtxSetCurrent(CUcontext ctx) { current = ctx; return CUDA_SUCCESS; }
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

static CUresult do_alloc_locked(CUdeviceptr *dptr, size_t n) {
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
static CUresult do_alloc(CUdeviceptr *dptr, size_t n) {
    pthread_mutex_lock(&lock);
    CUresult r = do_alloc_locked(dptr, n);
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult do_free(CUdeviceptr p) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_BLOCKS; i++) {
        if (blocks[i].p == p && p != 0) {
            free((void *)(uintptr_t)p);
            used_bytes -= blocks[i].n;
            blocks[i].p = 0; blocks[i].n = 0; blocks[i].ctx = NULL;
            pthread_mutex_unlock(&lock);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
}
size_t fake_cuda_used(void) { return used_bytes; }

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) {
    if (illegal_during(UNSAFE_MODES)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    __atomic_fetch_add(&n_alloc, 1, __ATOMIC_RELAXED);
    return do_alloc(dptr, n);
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    if (illegal_during(UNSAFE_MODES)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    __atomic_fetch_add(&n_free, 1, __ATOMIC_RELAXED);
    return do_free(p);
}
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s) {
    if (s == FAKE_BAD_STREAM) return CUDA_ERROR_INVALID_HANDLE;
    if (capture_status(s)) n_graph_allocs++;
    n_alloc_async++;
    if (s != FAKE_OTHER_STREAM) return do_alloc(dptr, n);
    CUresult r = cuCtxPushCurrent_v2(&other_context);
    if (r == CUDA_SUCCESS) { r = do_alloc(dptr, n); cuCtxPopCurrent_v2(NULL); }
    return r;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { if (capture_status(s)) n_graph_frees++; n_free_async++; return do_free(p); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s) { return cuMemAllocAsync(dptr, n, s); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, s); }
CUresult cuCtxSynchronize(void) {
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (illegal_during(ALL_MODES)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    __atomic_fetch_add(&n_sync, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

/* IPC: the handle names the driver allocation that contains the pointer (its base). */
CUresult cuIpcGetMemHandle(void *handle, CUdeviceptr p) {
    n_ipc++;
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (blocks[i].p && p >= blocks[i].p && p < blocks[i].p + blocks[i].n) {
            memset(handle, 0, 64);
            memcpy(handle, &blocks[i].p, sizeof blocks[i].p);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

/* Allocations that share the device's capacity but are not cuMemAlloc: virtual-memory handles,
 * managed memory, pinned host memory (counted against the same capacity, to test pressure). */
CUresult cuMemCreate(uint64_t *handle, size_t n, const void *prop, uint64_t flags) {
    (void)prop; (void)flags;
    n_create++;
    CUdeviceptr p;
    CUresult r = do_alloc(&p, n);
    if (r == CUDA_SUCCESS) *handle = p;
    return r;
}
CUresult cuMemRelease(uint64_t handle) { return do_free(handle); }
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned flags) { (void)flags; n_managed++; return do_alloc(dptr, n); }
CUresult cuMemAllocHost_v2(void **pp, size_t n) {
    n_host++;
    CUdeviceptr p;
    CUresult r = do_alloc(&p, n);
    if (r == CUDA_SUCCESS) *pp = (void *)(uintptr_t)p;
    return r;
}
CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags) { (void)flags; return cuMemAllocHost_v2(pp, n); }
CUresult cuMemFreeHost(void *p) { return do_free((CUdeviceptr)(uintptr_t)p); }

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

/* Under the table's lock: read while other threads allocate and free, the table once handed the
 * threaded stress test another block's range for a block just allocated (about 1 run in 150;
 * none in 1,200 with the lock, and never an overlap seen under it at allocation). */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_BLOCKS; i++) {
        if (blocks[i].p && p >= blocks[i].p && p < blocks[i].p + blocks[i].n) {
            if (base) *base = blocks[i].p;
            if (size) *size = blocks[i].n;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    CUdeviceptr base; size_t size;
    CUresult r = cuMemGetAddressRange_v2(&base, &size, p);
    if (r) return r;
    if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) { *(CUdeviceptr *)data = base; return CUDA_SUCCESS; }
    if (attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE) { *(size_t *)data = size; return CUDA_SUCCESS; }
    if (attr == 7) { /* CU_POINTER_ATTRIBUTE_BUFFER_ID: the allocation's slot */
        for (int i = 0; i < MAX_BLOCKS; i++) if (blocks[i].p == base) { *(uint64_t *)data = (uint64_t)i + 1; break; }
        return CUDA_SUCCESS;
    }
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
    {"cuCtxSetCurrent", (void *)cuCtxSetCurrent},
    {"cuCtxPushCurrent", (void *)cuCtxPushCurrent_v2},
    {"cuCtxPopCurrent", (void *)cuCtxPopCurrent_v2},
    {"cuDevicePrimaryCtxRetain", (void *)cuDevicePrimaryCtxRetain},
    {"cuStreamBeginCapture", (void *)cuStreamBeginCapture_v2},
    {"cuStreamEndCapture", (void *)cuStreamEndCapture},
    {"cuStreamGetCaptureInfo", (void *)cuStreamGetCaptureInfo_v2},
    {"cuIpcGetMemHandle", (void *)cuIpcGetMemHandle},
    {"cuMemCreate", (void *)cuMemCreate},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged},
    {"cuMemAllocHost", (void *)cuMemAllocHost_v2},
    {"cuMemHostAlloc", (void *)cuMemHostAlloc},
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    (void)version;
    int ptds = (flags & 2) != 0; /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(symbol, table[i].name) == 0) {
            *pfn = table[i].fn;
            if (ptds && !strcmp(symbol, "cuMemAllocAsync")) *pfn = (void *)cuMemAllocAsync_ptsz;
            if (ptds && !strcmp(symbol, "cuMemFreeAsync")) *pfn = (void *)cuMemFreeAsync_ptsz;
            if (ptds && !strcmp(symbol, "cuStreamBeginCapture")) *pfn = (void *)cuStreamBeginCapture_ptsz;
            if (ptds && !strcmp(symbol, "cuStreamEndCapture")) *pfn = (void *)cuStreamEndCapture_ptsz;
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
