/* The CUDA driver hooks of libresizealloc.so against fake_libcuda.c, through the three routes a
 * program can take: direct symbol calls, dlsym on the driver's handle, and cuGetProcAddress_v2.
 * Usage: routes [off]   ("off": RESIZEALLOC_CUDA=off is set, everything must pass through). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
CUresult cuInit(unsigned);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, void *);
CUresult cuMemFreeAsync(CUdeviceptr, void *);
CUresult cuCtxSynchronize(void);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);
void fake_cuda_counts(long out[6]);
void *fake_cuda_block_ctx(CUdeviceptr);
void *fake_cuda_context(int which);
CUresult cuCtxDestroy_v2(void *);
CUresult cuStreamDestroy_v2(void *);
CUresult cuMemPoolSetAccess(void *, const void *, size_t);
CUresult cuDevicePrimaryCtxRelease_v2(int);
CUresult cuPointerGetAttributes(unsigned, int *, void **, CUdeviceptr);
struct cuda_stats { uint64_t pools, reserved, in_use, high_water, overflow_blocks, segments, own_syncs, observed_syncs, driver_allocs; };
static int (*cuda_stats_get)(struct cuda_stats *, size_t);
static uint64_t pools_now(void) { struct cuda_stats s = {0}; cuda_stats_get(&s, sizeof s); return s.pools; }
CUresult cuMemPoolCreate(void **, const void *);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, void *, void *);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*sync_fn)(void);
typedef CUresult (*proc_fn)(const char *, void **, int, uint64_t, int *);

static int failures;
#define CHECK(c, what) do { if (c) printf("ok %s\n", what); else { printf("FAIL %s (line %d)\n", what, __LINE__); failures++; } } while (0)

static long counts(int i) { long c[6]; fake_cuda_counts(c); return c[i]; }
enum { ALLOCS, FREES, SYNCS, ALLOCS_ASYNC, FREES_ASYNC, POOL_ALLOCS };

static void (*region_begin)(void);
static int (*region_end)(void);

/* N alloc/write/check/free/sync rounds through the given entry points; returns driver allocs. */
static long rounds(alloc_fn a, free_fn f, sync_fn s, int n) {
    long before = counts(ALLOCS);
    for (int i = 0; i < n; i++) {
        CUdeviceptr p = 0;
        size_t size = 1000 + (size_t)i * 13;
        if (a(&p, size) != 0 || p == 0) { printf("FAIL alloc in round %d\n", i); failures++; return -1; }
        memset((void *)(uintptr_t)p, i & 255, size); /* fake device memory is host memory */
        unsigned char *b = (unsigned char *)(uintptr_t)p;
        if (b[0] != (i & 255) || b[size - 1] != (i & 255)) { printf("FAIL contents\n"); failures++; }
        if (f(p) != 0) { printf("FAIL free in round %d\n", i); failures++; }
        if (s() != 0) { printf("FAIL sync\n"); failures++; }
    }
    return counts(ALLOCS) - before;
}

int main(int argc, char **argv) {
    int off = argc > 1 && !strcmp(argv[1], "off");
    region_begin = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    region_end = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    cuda_stats_get = (int (*)(struct cuda_stats *, size_t))dlsym(RTLD_DEFAULT, "resize_cuda_stats_get");
    if (!region_begin || !region_end || !cuda_stats_get) { puts("FAIL libresizealloc.so not preloaded"); return 1; }
    CHECK(cuInit(0) == 0, "cuInit");

    /* Route 1: direct symbols. */
    region_begin();
    long driver_allocs = rounds(cuMemAlloc_v2, cuMemFree_v2, cuCtxSynchronize, 1000);
    if (off) CHECK(driver_allocs == 1000, "off: every allocation reaches the driver");
    else CHECK(driver_allocs >= 1 && driver_allocs <= 2, "direct: 1000 alloc/free/sync rounds served by the pool");

    CUdeviceptr p = 0, base = 0;
    size_t size = 0;
    CHECK(cuMemAlloc_v2(&p, 3000) == 0, "alloc 3000");
    CHECK(cuMemGetAddressRange_v2(&base, &size, p + 10) == 0 && base == p, "address range start");
    if (!off) {
        CHECK(size == 3072, "address range: the suballocated block (3000 rounded to 512)");
        size_t attr = 0;
        CUdeviceptr start = 0;
        CHECK(cuPointerGetAttribute(&attr, 12, p + 5) == 0 && attr == 3072, "pointer attribute range size");
        CHECK(cuPointerGetAttribute(&start, 11, p + 5) == 0 && start == p, "pointer attribute range start");
    }
    CHECK(cuMemFree_v2(p) == 0, "free");
    CHECK(cuMemFree_v2(p) == 1, "double free -> CUDA_ERROR_INVALID_VALUE");
    CHECK(cuMemFree_v2(12345) == 1, "unknown pointer -> CUDA_ERROR_INVALID_VALUE");
    CHECK(cuMemAlloc_v2(&p, 0) == 1, "zero size -> CUDA_ERROR_INVALID_VALUE");
    CHECK(cuMemAlloc_v2(NULL, 16) == 1, "null out pointer -> CUDA_ERROR_INVALID_VALUE");
    CHECK(cuMemAlloc_v2(&p, (size_t)64 << 30) == 2, "more than the device has -> CUDA_ERROR_OUT_OF_MEMORY");
    CHECK(cuMemAlloc_v2(&p, 100) == 0 && cuMemFree_v2(p) == 0, "the pool still works after the errors");

    /* cuMemFreeAsync: reusable at once on the same stream, not on another one. */
    CUdeviceptr a = 0, b = 0, c = 0;
    cuMemAllocAsync(&a, 4096, (void *)7);
    cuMemFreeAsync(a, (void *)7);
    cuMemAllocAsync(&b, 4096, (void *)8);
    cuMemAllocAsync(&c, 4096, (void *)7);
    if (!off) CHECK(b != a && c == a, "async free: same stream reuses, other stream waits");
    cuMemFreeAsync(b, (void *)8);
    cuMemFreeAsync(c, (void *)7);
    cuCtxSynchronize();
    /* cuMemAllocFromPoolAsync: ordinary pools are served by ours, IPC-exportable ones are not. */
    int props_plain[8] = {1, 0, 1, 0}, props_ipc[8] = {1, 1, 1, 0}; /* allocType, handleTypes, location */
    void *plain_pool = 0, *ipc_pool = 0;
    CHECK(cuMemPoolCreate(&plain_pool, props_plain) == 0 && cuMemPoolCreate(&ipc_pool, props_ipc) == 0, "cuMemPoolCreate");
    long pool_before = counts(POOL_ALLOCS);
    CUdeviceptr d = 0, e = 0;
    CHECK(cuMemAllocFromPoolAsync(&d, 8192, plain_pool, (void *)7) == 0 && cuMemFreeAsync(d, (void *)7) == 0, "alloc from an ordinary pool");
    CHECK(cuMemAllocFromPoolAsync(&e, 8192, ipc_pool, (void *)7) == 0 && cuMemFreeAsync(e, (void *)7) == 0, "alloc from an IPC pool");
    if (off) CHECK(counts(POOL_ALLOCS) - pool_before == 2, "off: both pool allocations reach the driver");
    else CHECK(counts(POOL_ALLOCS) - pool_before == 1, "the ordinary pool is served by ours, the IPC pool by the driver");
    cuCtxSynchronize();

    /* cuPointerGetAttributes: the driver answers, the range attributes are the block's. */
    CHECK(cuMemAlloc_v2(&p, 3000) == 0, "alloc for cuPointerGetAttributes");
    {
        int attrs[3] = {12, 1, 11};
        size_t range_size = 0; unsigned mem_type = 0; CUdeviceptr range_start = 0;
        void *data[3] = {&range_size, &mem_type, &range_start};
        CHECK(cuPointerGetAttributes(3, attrs, data, p + 100) == 0 && mem_type == 2 && range_start == p, "cuPointerGetAttributes");
        if (!off) CHECK(range_size == 3072, "cuPointerGetAttributes: the range is the pool block");
        CHECK(cuPointerGetAttributes(3, attrs, NULL, p) == 1, "cuPointerGetAttributes with no data array -> the driver's error");
    }
    CHECK(cuMemFree_v2(p) == 0, "free after cuPointerGetAttributes");

    /* A stream of another context: the block comes from that context's pool, allocated there. */
    uint64_t pools_before = pools_now();
    CUdeviceptr q = 0;
    CHECK(cuMemAllocAsync(&q, 4096, (void *)0x99) == 0, "alloc on a stream of another context");
    CHECK(fake_cuda_block_ctx(q) == fake_cuda_context(1), "the memory belongs to the stream's context");
    if (!off) CHECK(pools_now() == pools_before + 1, "a second pool for the second context");
    CHECK(cuMemAllocAsync(&p, 100, (void *)0xdead) == 400, "a bad stream -> the driver's CUDA_ERROR_INVALID_HANDLE");
    /* Destroying that context frees its memory: its pool goes with it. */
    CHECK(cuCtxDestroy_v2(fake_cuda_context(1)) == 0, "cuCtxDestroy_v2");
    if (!off) CHECK(pools_now() == pools_before, "the destroyed context's pool is gone");
    CHECK(cuMemFreeAsync(q, (void *)0x99) == 1, "a block of a destroyed context -> the driver's CUDA_ERROR_INVALID_VALUE");

    /* A destroyed stream's handle may come back while its work runs: its frees wait for a sync. */
    CUdeviceptr s1 = 0, s2 = 0;
    CHECK(cuMemAllocAsync(&s1, 4096, (void *)0x77) == 0 && cuMemFreeAsync(s1, (void *)0x77) == 0, "alloc/free on stream 0x77");
    CHECK(cuStreamDestroy_v2((void *)0x77) == 0, "cuStreamDestroy_v2");
    CHECK(cuMemAllocAsync(&s2, 4096, (void *)0x77) == 0, "alloc on a new stream with the same handle");
    if (!off) CHECK(s2 != s1, "a destroyed stream's freed block is not reused before a sync");
    cuMemFreeAsync(s2, (void *)0x77);
    /* Queries on a freed pool block: no allocation there, as the driver would say. */
    CUdeviceptr gone = 0;
    CHECK(cuMemAlloc_v2(&gone, 3000) == 0 && cuMemFree_v2(gone) == 0, "alloc/free for the queries");
    if (!off) {
        size_t attr_size = 0;
        CHECK(cuMemGetAddressRange_v2(&base, &size, gone + 10) == 500, "address range of a freed pool block -> CUDA_ERROR_NOT_FOUND");
        CHECK(cuPointerGetAttribute(&attr_size, 12, gone) == 1, "range size of a freed pool block -> CUDA_ERROR_INVALID_VALUE");
    }
    /* Pools with access for other devices, or with a host location, stay the driver's. */
    int props_host[8] = {1, 0, 2, 0};
    void *shared_pool = 0, *host_pool = 0;
    CHECK(cuMemPoolCreate(&shared_pool, props_plain) == 0 && cuMemPoolSetAccess(shared_pool, NULL, 0) == 0, "cuMemPoolSetAccess");
    CHECK(cuMemPoolCreate(&host_pool, props_host) == 0, "a host-located pool");
    pool_before = counts(POOL_ALLOCS);
    CHECK(cuMemAllocFromPoolAsync(&d, 8192, shared_pool, (void *)7) == 0 && cuMemFreeAsync(d, (void *)7) == 0, "alloc from the shared pool");
    CHECK(cuMemAllocFromPoolAsync(&e, 8192, host_pool, (void *)7) == 0 && cuMemFreeAsync(e, (void *)7) == 0, "alloc from the host pool");
    CHECK(counts(POOL_ALLOCS) - pool_before == 2, "both reach the driver");
    cuCtxSynchronize();
    CHECK(region_end() == 0, "region end");

    /* Outside regions everything passes through. */
    long before = counts(ALLOCS);
    CHECK(cuMemAlloc_v2(&p, 100) == 0 && cuMemFree_v2(p) == 0, "outside: alloc/free");
    CHECK(counts(ALLOCS) - before == 1, "outside: the driver serves it");

    /* Route 2: dlsym on the driver's handle. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    alloc_fn da = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    free_fn df = (free_fn)dlsym(h, "cuMemFree_v2");
    sync_fn ds = (sync_fn)dlsym(h, "cuCtxSynchronize");
    CHECK(da && df && ds, "dlsym finds the entry points");
    region_begin();
    driver_allocs = rounds(da, df, ds, 500);
    if (off) CHECK(driver_allocs == 500, "off: dlsym gives the driver's own functions");
    else CHECK(driver_allocs <= 1, "dlsym route: served by the pool");
    region_end();

    /* Route 3: cuGetProcAddress_v2, called directly and found through dlsym. */
    proc_fn procs[2] = {cuGetProcAddress_v2, (proc_fn)dlsym(h, "cuGetProcAddress_v2")};
    for (int k = 0; k < 2; k++) {
        void *pa = 0, *pf = 0, *ps = 0;
        int st = 0;
        CHECK(procs[k] && procs[k]("cuMemAlloc", &pa, 12000, 0, &st) == 0 && st == 1, "cuGetProcAddress_v2 cuMemAlloc");
        procs[k]("cuMemFree", &pf, 12000, 0, NULL);
        procs[k]("cuCtxSynchronize", &ps, 12000, 0, NULL);
        region_begin();
        driver_allocs = rounds((alloc_fn)pa, (free_fn)pf, (sync_fn)ps, 500);
        if (off) CHECK(driver_allocs == 500, "off: cuGetProcAddress gives the driver's own functions");
        else CHECK(driver_allocs <= 1, k == 0 ? "cuGetProcAddress_v2 route (direct): served by the pool" : "cuGetProcAddress_v2 route (via dlsym): served by the pool");
        region_end();
    }
    void *missing = (void *)1;
    CHECK(cuGetProcAddress_v2("cuNoSuchThing", &missing, 12000, 0, NULL) == 500 && missing == NULL, "unknown names keep the driver's answer");
    CHECK(dlsym(RTLD_DEFAULT, "strlen") != NULL, "other names pass through dlsym");

    /* The release that drops the primary context's count to zero destroys it: its pool goes. */
    uint64_t pools_at_end = pools_now();
    CHECK(cuDevicePrimaryCtxRelease_v2(0) == 0, "the last cuDevicePrimaryCtxRelease_v2");
    if (!off) CHECK(pools_at_end >= 1 && pools_now() == pools_at_end - 1, "the released context's pool is gone");

    if (failures) { printf("%d failures\n", failures); return 1; }
    puts("all ok");
    return 0;
}
