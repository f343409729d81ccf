/* The runtime hooks of libresizealloc.so (cudaMalloc, cudaFree, cudaMallocAsync, cudaFreeAsync,
 * their _ptsz forms, cudaDeviceSynchronize, cudaDeviceReset) against fake_libcudart.c over
 * fake_libcuda.c. Built twice: linked with the shared fake cudart (the exports serve the calls)
 * and with the fake cudart compiled in (static cudart: the calls reach the pools through the
 * driver hooks cudart's cuGetProcAddress_v2 lookups hand it).
 * Usage: runtime shared|static [off|process]   ("off": RESIZEALLOC_CUDA=off is set; "process":
 * RESIZEALLOC_REGION=process is set, every allocation is pooled and there are no regions). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMallocAsync(void **, size_t, void *);
cudaError_t cudaMallocAsync_ptsz(void **, size_t, void *);
cudaError_t cudaFreeAsync(void *, void *);
cudaError_t cudaFreeAsync_ptsz(void *, void *);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaGetLastError(void);
void fake_cudart_counts(long out[6]);
void fake_cuda_counts(long out[6]);
long fake_cuda_resets(void);

struct cuda_stats { uint64_t pools, reserved, in_use, high_water, overflow_blocks, segments, own_syncs, observed_syncs, driver_allocs; };
static int (*cuda_stats_get)(struct cuda_stats *, size_t);
static void (*region_begin)(void);
static int (*region_end)(void);

static int failures;
#define CHECK(c, what) do { if (c) printf("ok %s\n", what); else { printf("FAIL %s (line %d)\n", what, __LINE__); failures++; } } while (0)

static long rt_mallocs(void) { long c[6]; fake_cudart_counts(c); return c[0]; }
static long driver_allocs(void) { long c[6]; fake_cuda_counts(c); return c[0]; }
static struct cuda_stats stats(void) { struct cuda_stats s; memset(&s, 0, sizeof s); cuda_stats_get(&s, sizeof s); return s; }
#define MIB ((size_t)1 << 20)

int main(int argc, char **argv) {
    int is_static = argc > 1 && !strcmp(argv[1], "static");
    int off = argc > 2 && !strcmp(argv[2], "off");
    int process = argc > 2 && !strcmp(argv[2], "process");
    region_begin = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    region_end = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    cuda_stats_get = (int (*)(struct cuda_stats *, size_t))dlsym(RTLD_DEFAULT, "resize_cuda_stats_get");
    if (!region_begin || !region_end || !cuda_stats_get) { puts("FAIL libresizealloc.so not preloaded"); return 1; }

    /* 1. The first cudaMalloc, before cudart made a context current: cudart answers (and
     *    creates the context); its own driver call is pooled. */
    region_begin();
    void *p = NULL;
    long rt0 = rt_mallocs();
    CHECK(cudaMalloc(&p, 1000) == 0 && p, "first cudaMalloc");
    CHECK(rt_mallocs() == rt0 + 1, "the first cudaMalloc reaches cudart (no context yet)");
    if (!off) CHECK(stats().pools == 1, "cudart's own driver call is pooled");
    CHECK(cudaFree(p) == 0, "cudaFree");

    /* 2. alloc / write / free / sync rounds. */
    rt0 = rt_mallocs();
    long d0 = driver_allocs();
    uint64_t syncs0 = stats().observed_syncs;
    for (int i = 0; i < 1000; i++) {
        size_t n = 1000 + (size_t)i * 13;
        if (cudaMalloc(&p, n) != 0 || !p) { printf("FAIL cudaMalloc in round %d\n", i); failures++; break; }
        memset(p, i & 255, n); /* fake device memory is host memory */
        if (((unsigned char *)p)[n - 1] != (i & 255)) { puts("FAIL contents"); failures++; }
        if (cudaFree(p) != 0) { printf("FAIL cudaFree in round %d\n", i); failures++; }
        if (cudaDeviceSynchronize() != 0) { puts("FAIL cudaDeviceSynchronize"); failures++; }
    }
    if (off) {
        CHECK(driver_allocs() - d0 == 1000, "off: every cudaMalloc reaches the driver");
    } else {
        CHECK(driver_allocs() - d0 <= 1, "1000 cudaMalloc/cudaFree/sync rounds served by the pool");
        CHECK(stats().observed_syncs - syncs0 >= 1000, "the pool sees the program's synchronisations");
        if (is_static) CHECK(rt_mallocs() - rt0 == 1000, "static cudart: its cudaMalloc runs, its driver calls are pooled");
        else CHECK(rt_mallocs() == rt0, "shared cudart: the exports serve cudaMalloc without cudart");
    }

    /* 3. Bad input: exactly cudart's answers, recorded where cudart records them. */
    cudaGetLastError();
    CHECK(cudaMalloc(NULL, 16) == 1 && cudaGetLastError() == 1, "null out pointer -> cudaErrorInvalidValue, recorded");
    p = (void *)1;
    CHECK(cudaMalloc(&p, 0) == 0 && p == NULL, "size 0 -> cudart's answer (success, NULL)");
    CHECK(cudaMalloc(&p, (size_t)64 << 30) == 2 && cudaGetLastError() == 2, "more than the device has -> cudaErrorMemoryAllocation, recorded");
    CHECK(cudaMalloc(&p, 100) == 0 && cudaFree(p) == 0, "alloc and free after the errors");
    CHECK(cudaFree(p) == 1, "double free -> cudaErrorInvalidValue");
    CHECK(cudaFree((void *)12345) == 1 && cudaGetLastError() == 1, "unknown pointer -> cudaErrorInvalidValue, recorded");
    CHECK(cudaFree(NULL) == 0, "cudaFree(NULL)");
    CHECK(cudaMalloc(&p, 100) == 0 && cudaFree(p) == 0, "the pool still works after the errors");

    /* 4. Stream-ordered: reusable at once on the same stream, not on another one. */
    void *a = 0, *b = 0, *c = 0, *e = 0, *f = 0;
    CHECK(cudaMallocAsync(&a, 4096, (void *)7) == 0 && cudaFreeAsync(a, (void *)7) == 0, "cudaMallocAsync/cudaFreeAsync");
    cudaMallocAsync(&b, 4096, (void *)8);
    cudaMallocAsync(&c, 4096, (void *)7);
    if (!off) CHECK(b != a && c == a, "cudaFreeAsync: same stream reuses, other stream waits");
    CHECK(cudaMallocAsync_ptsz(&e, 4096, 0) == 0 && cudaFreeAsync_ptsz(e, 0) == 0, "the _ptsz forms");
    cudaMallocAsync_ptsz(&f, 4096, 0);
    if (!off) CHECK(f == e, "_ptsz: the thread's own stream reuses at once");
    cudaFreeAsync(b, (void *)8);
    cudaFreeAsync(c, (void *)7);
    cudaFreeAsync_ptsz(f, 0);
    CHECK(cudaDeviceSynchronize() == 0, "sync");
    CHECK(region_end() == 0, "region end");

    /* 5. Resize: a region that overflowed into extra segments is served by one segment of its
     *    peak from the next region on. */
    if (!off && !process) {
        long delta[3];
        uint64_t overflow[3];
        for (int r = 0; r < 3; r++) {
            long before = driver_allocs();
            region_begin();
            void *blk[3];
            for (int i = 0; i < 3; i++) {
                CHECK(cudaMalloc(&blk[i], 3 * MIB / 2) == 0, "1.5 MiB block");
                memset(blk[i], r, 3 * MIB / 2);
            }
            for (int i = 0; i < 3; i++) cudaFree(blk[i]);
            cudaDeviceSynchronize();
            region_end();
            delta[r] = driver_allocs() - before;
            overflow[r] = stats().overflow_blocks;
        }
        printf("resize: driver allocations per region %ld %ld %ld, overflow blocks %lu %lu %lu\n", delta[0], delta[1], delta[2],
               (unsigned long)overflow[0], (unsigned long)overflow[1], (unsigned long)overflow[2]);
        CHECK(overflow[0] >= 1, "the first region overflowed");
        CHECK(delta[1] == 1 && overflow[1] == overflow[0], "the next region gets one segment covering the peak");
        CHECK(delta[2] == 0 && overflow[2] == overflow[0], "and the one after needs no driver call");
        CHECK(stats().high_water >= 9 * MIB / 2, "high water: the region's peak");
    }

    /* 6. cudaDeviceReset destroys the context's memory: the pool goes with it. */
    region_begin();
    CHECK(cudaMalloc(&p, 100) == 0, "alloc before the reset");
    long resets = fake_cuda_resets();
    CHECK(cudaDeviceReset() == 0 && fake_cuda_resets() == resets + 1, "cudaDeviceReset");
    if (!off) CHECK(stats().pools == 0, "the reset context's pool is gone");
    CHECK(cudaFree(p) == 1, "a block of the reset context -> cudaErrorInvalidValue (the driver's answer)");
    d0 = driver_allocs();
    CHECK(cudaMalloc(&p, 100) == 0 && cudaFree(p) == 0, "alloc after the reset");
    if (!off) CHECK(stats().pools == 1 && driver_allocs() == d0 + 1, "a fresh pool with fresh memory");
    cudaDeviceSynchronize();
    region_end();

    /* 7. Outside regions cudart and the driver serve everything. */
    if (process) goto done;
    rt0 = rt_mallocs();
    d0 = driver_allocs();
    CHECK(cudaMalloc(&p, 100) == 0 && cudaFree(p) == 0, "outside: cudaMalloc/cudaFree");
    CHECK(rt_mallocs() == rt0 + 1 && driver_allocs() == d0 + 1, "outside: cudart and the driver serve it");

done:
    if (failures) { printf("%d failures\n", failures); return 1; }
    puts("all ok");
    return 0;
}
