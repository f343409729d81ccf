/* Memory pressure against fake_libcuda.c with FAKE_CUDA_CAPACITY=64 MiB: the pools' cached free
 * segments go back before cuMemCreate, cuMemAllocManaged, cuMemAllocHost_v2 or a pass-through
 * cuMemAlloc fails with out of memory; with RESIZEALLOC_CUDA_IDLE_MS=50, an idle pool gives its
 * cache back at a synchronisation; with RESIZEALLOC_CUDA_MAX_CACHED=4M, at most 4 MiB stay
 * cached after a synchronisation.
 * Usage: pressure oom|idle|cap */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
CUresult cuInit(unsigned);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuCtxSynchronize(void);
CUresult cuMemCreate(uint64_t *, size_t, const void *, uint64_t);
CUresult cuMemRelease(uint64_t);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemAllocHost_v2(void **, size_t);
CUresult cuMemFreeHost(void *);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
size_t fake_cuda_used(void);

struct cuda_stats { uint64_t pools, reserved, in_use, high_water, overflow_blocks, segments, own_syncs, observed_syncs, driver_allocs, pressure_releases, capture_refusals; };
static int (*cuda_stats_get)(struct cuda_stats *, size_t);
static struct cuda_stats stats(void) { struct cuda_stats s; memset(&s, 0, sizeof s); cuda_stats_get(&s, sizeof s); return s; }
static int failures;
#define CHECK(c, what) do { if (c) printf("ok %s\n", what); else { printf("FAIL %s (line %d)\n", what, __LINE__); failures++; } } while (0)
#define MIB ((size_t)1 << 20)

/* Leaves the pool holding `n` cached MiB in one segment, nothing in use. */
static void cache(size_t n) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, n * MIB) == 0 && cuMemFree_v2(p) == 0 && cuCtxSynchronize() == 0, "a cached segment");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "oom";
    void (*region_begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    cuda_stats_get = (int (*)(struct cuda_stats *, size_t))dlsym(RTLD_DEFAULT, "resize_cuda_stats_get");
    if (!region_begin || !cuda_stats_get) { puts("FAIL libresizealloc.so not preloaded"); return 1; }
    CHECK(cuInit(0) == 0, "cuInit");
    region_begin();
    if (!strcmp(mode, "oom")) {
        cache(40);
        CHECK(stats().reserved == 40 * MIB && fake_cuda_used() == 40 * MIB, "the pool caches 40 MiB of 64");
        uint64_t h = 0;
        CHECK(cuMemCreate(&h, 40 * MIB, NULL, 0) == 0, "cuMemCreate of 40 MiB succeeds");
        CHECK(stats().reserved == 0 && stats().pressure_releases == 1, "because the pool gave its cache back");
        CHECK(cuMemRelease(h) == 0, "cuMemRelease");
        cache(40);
        CUdeviceptr m = 0;
        CHECK(cuMemAllocManaged(&m, 40 * MIB, 1) == 0 && stats().reserved == 0, "cuMemAllocManaged: the same");
        CHECK(cuMemFree_v2(m) == 0, "free managed");
        cache(40);
        void *host = NULL;
        CHECK(cuMemAllocHost_v2(&host, 40 * MIB) == 0 && stats().reserved == 0, "cuMemAllocHost_v2: the same");
        CHECK(cuMemFreeHost(host) == 0, "cuMemFreeHost");
        cache(40);
        CHECK(cuMemHostAlloc(&host, 40 * MIB, 0) == 0 && stats().reserved == 0, "cuMemHostAlloc (cudaHostAlloc, cudaMallocHost): the same");
        CHECK(cuMemFreeHost(host) == 0, "cuMemFreeHost");
        /* A pass-through cuMemAlloc (outside regions) too. */
        cache(40);
        int (*region_end)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
        region_end();
        CUdeviceptr big = 0;
        CHECK(cuMemAlloc_v2(&big, 40 * MIB) == 0 && stats().reserved == 0, "a pass-through cuMemAlloc: the same");
        cuMemFree_v2(big);
        region_begin();
        /* Frees in flight: synchronised, then released. */
        CUdeviceptr p = 0;
        CHECK(cuMemAlloc_v2(&p, 40 * MIB) == 0 && cuMemFree_v2(p) == 0, "40 MiB freed, not yet synchronised");
        CHECK(cuMemCreate(&h, 40 * MIB, NULL, 0) == 0 && stats().reserved == 0, "cuMemCreate: the pool syncs for its frees in flight, then releases");
        cuMemRelease(h);
        /* Real out of memory stays out of memory. */
        CHECK(cuMemCreate(&h, 100 * MIB, NULL, 0) == 2, "more than the device has -> CUDA_ERROR_OUT_OF_MEMORY");
    } else if (!strcmp(mode, "idle")) {
        cache(8);
        CHECK(stats().reserved == 8 * MIB, "8 MiB cached");
        cuCtxSynchronize();
        CHECK(stats().reserved == 8 * MIB, "kept while the pool is busy");
        usleep(150 * 1000);
        cuCtxSynchronize();
        CHECK(stats().reserved == 0 && fake_cuda_used() == 0, "idle for 150 ms > 50: given back at the next sync");
        CUdeviceptr p = 0;
        CHECK(cuMemAlloc_v2(&p, MIB) == 0 && cuMemFree_v2(p) == 0, "the pool works after the release");
    } else {
        CUdeviceptr p[6];
        for (int i = 0; i < 6; i++) CHECK(cuMemAlloc_v2(&p[i], 3 * MIB) == 0, "3 MiB");
        for (int i = 0; i < 6; i++) cuMemFree_v2(p[i]);
        CHECK(stats().reserved >= 18 * MIB, "six segments held before the sync");
        cuCtxSynchronize();
        struct cuda_stats s = stats();
        CHECK(s.reserved - s.in_use <= 4 * MIB, "at most RESIZEALLOC_CUDA_MAX_CACHED=4M cached after the sync");
        CHECK(s.pressure_releases >= 5, "the rest went back");
    }
    if (failures) { printf("%d failures\n", failures); return 1; }
    puts("all ok");
    return 0;
}
