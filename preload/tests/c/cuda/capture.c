/* Stream capture (CUDA graphs) against fake_libcuda.c, which refuses, counts and invalidates
 * what the real driver refuses during a capture: a synchronisation during any capture,
 * cuMemAlloc/cuMemFree during a global one. Stream-ordered allocations on a capturing stream
 * must reach the driver (the graph needs its memory nodes), and the pools must never make an
 * illegal call themselves, in relaxed and global mode, through the driver API and through
 * cudart's cudaStreamBeginCapture, also for a capture begun where no hook sees it. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
CUresult cuInit(unsigned);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, void *);
CUresult cuMemFreeAsync(CUdeviceptr, void *);
CUresult cuCtxSynchronize(void);
CUresult cuStreamBeginCapture_v2(void *, int);
CUresult cuStreamEndCapture(void *, void **);
CUresult fake_cuda_begin_capture_unseen(void *, int);
long fake_cuda_count(const char *);
typedef int cudaError_t;
cudaError_t cudaStreamBeginCapture(void *, int);
cudaError_t cudaStreamEndCapture(void *, void **);
cudaError_t cudaMallocAsync(void **, size_t, void *);
cudaError_t cudaFreeAsync(void *, void *);

struct cuda_stats { uint64_t pools, reserved, in_use, high_water, overflow_blocks, segments, own_syncs, observed_syncs, driver_allocs, pressure_releases, capture_refusals; };
static int (*cuda_stats_get)(struct cuda_stats *, size_t);
static int (*cuda_trim)(void);
static struct cuda_stats stats(void) { struct cuda_stats s; memset(&s, 0, sizeof s); cuda_stats_get(&s, sizeof s); return s; }

static int failures;
#define CHECK(c, what) do { if (c) printf("ok %s\n", what); else { printf("FAIL %s (line %d)\n", what, __LINE__); failures++; } } while (0)
enum { GLOBAL = 0, THREAD_LOCAL = 1, RELAXED = 2 };
#define MIB ((size_t)1 << 20)
#define S ((void *)0x50)
#define T ((void *)0x60)
#define U ((void *)0x70)

int main(void) {
    void (*region_begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    cuda_stats_get = (int (*)(struct cuda_stats *, size_t))dlsym(RTLD_DEFAULT, "resize_cuda_stats_get");
    cuda_trim = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_cuda_trim");
    if (!region_begin || !cuda_stats_get || !cuda_trim) { puts("FAIL libresizealloc.so not preloaded"); return 1; }
    CHECK(cuInit(0) == 0, "cuInit");
    region_begin();
    CUdeviceptr x = 0, g = 0, a = 0, b = 0, y = 0;
    CHECK(cuMemAllocAsync(&x, 4096, T) == 0 && cuMemFreeAsync(x, T) == 0, "a pooled block freed on T (a free in flight)");
    long allocs0 = fake_cuda_count("allocs"), syncs0 = fake_cuda_count("syncs");

    /* A. Relaxed mode. */
    CHECK(cuStreamBeginCapture_v2(S, RELAXED) == 0, "relaxed capture begins on S");
    uint64_t in_use = stats().in_use;
    long graph0 = fake_cuda_count("graph_allocs");
    CHECK(cuMemAllocAsync(&g, 4096, S) == 0, "cuMemAllocAsync on the capturing stream");
    CHECK(fake_cuda_count("graph_allocs") == graph0 + 1 && stats().in_use == in_use, "relaxed: it reached the driver (a memory node), not the pool");
    CHECK(cuMemFreeAsync(g, S) == 0 && fake_cuda_count("graph_frees") == 1, "relaxed: its free reaches the driver too");
    /* The pool needs room: it would sync for the free in flight, which a capture forbids. */
    CHECK(cuMemAlloc_v2(&a, MIB) == 0 && cuMemAlloc_v2(&b, MIB) == 0, "cuMemAlloc during a relaxed capture (legal)");
    CHECK(cuMemFree_v2(a) == 0 && cuMemFree_v2(b) == 0, "cuMemFree during a relaxed capture (legal)");
    CHECK(cuMemAlloc_v2(&a, MIB) == 0 && cuMemAlloc_v2(&b, MIB) == 0 && cuMemFree_v2(a) == 0 && cuMemFree_v2(b) == 0, "again, with frees in flight");
    CHECK(cuda_trim() == 0, "resize_cuda_trim during a relaxed capture");
    CHECK(fake_cuda_count("syncs") == syncs0, "relaxed: the pool never synchronised");
    CHECK(fake_cuda_count("allocs") > allocs0, "relaxed: the pool grew instead (cuMemAlloc is legal there)");
    CHECK(fake_cuda_count("illegal") == 0, "relaxed: no illegal call");
    CHECK(cuStreamEndCapture(S, NULL) == 0, "relaxed capture ends valid");

    /* B. Global mode: no sync, no cuMemAlloc/cuMemFree from the pools. */
    CHECK(cuStreamBeginCapture_v2(S, GLOBAL) == 0, "global capture begins on S");
    allocs0 = fake_cuda_count("allocs");
    graph0 = fake_cuda_count("graph_allocs");
    CHECK(cuMemAllocAsync(&g, 4096, S) == 0 && fake_cuda_count("graph_allocs") == graph0 + 1, "global: the captured allocation reaches the driver");
    in_use = stats().in_use;
    uint64_t refusals = stats().capture_refusals;
    CHECK(cuMemAllocAsync(&y, 8 * MIB, T) == 0, "global: a big allocation on another stream");
    CHECK(stats().in_use == in_use && stats().capture_refusals == refusals + 1, "global: the pool refused it (it needed a segment) and the driver served it");
    CHECK(cuMemFreeAsync(y, T) == 0, "and its free went to the driver");
    CUdeviceptr small = 0;
    CHECK(cuMemAllocAsync(&small, 512, T) == 0 && stats().in_use == in_use + 512, "global: what the pool holds still serves");
    CHECK(cuMemFreeAsync(small, S) == 0, "global: a pool block freed on the capturing stream");
    CHECK(fake_cuda_count("graph_frees") == 1, "is the pool's (as a synchronous free), not a graph node");
    CHECK(cuda_trim() == 0, "resize_cuda_trim during a global capture");
    CHECK(fake_cuda_count("allocs") == allocs0 && fake_cuda_count("illegal") == 0, "global: no cuMemAlloc, no sync, nothing illegal");
    CHECK(cuMemFreeAsync(g, S) == 0, "free of the captured allocation");
    CHECK(cuStreamEndCapture(S, NULL) == 0, "global capture ends valid");
    graph0 = fake_cuda_count("graph_allocs");
    CHECK(cuMemAllocAsync(&g, 4096, S) == 0 && fake_cuda_count("graph_allocs") == graph0 && stats().in_use > in_use, "after the capture, S is pooled again");
    CHECK(cuMemFreeAsync(g, S) == 0 && cuCtxSynchronize() == 0, "free and sync after the capture");

    /* C. A capture begun where no hook sees it: found by the query, treated as global. */
    CHECK(fake_cuda_begin_capture_unseen(U, GLOBAL) == 0, "a capture the library did not see begin");
    graph0 = fake_cuda_count("graph_allocs");
    CHECK(cuMemAllocAsync(&g, 4096, U) == 0 && fake_cuda_count("graph_allocs") == graph0 + 1, "unseen: the captured allocation reaches the driver");
    CHECK(cuMemAlloc_v2(&a, 64) == 0 && cuMemFree_v2(a) == 0, "a free in flight");
    in_use = stats().in_use;
    CHECK(cuMemAllocAsync(&y, 16 * MIB, T) == 0 && stats().in_use == in_use, "unseen: the pool refuses what needs a driver call");
    cuMemFreeAsync(y, T);
    CHECK(cuda_trim() == 0 && fake_cuda_count("illegal") == 0, "unseen: nothing illegal");
    cuMemFreeAsync(g, U);
    CHECK(cuStreamEndCapture(U, NULL) == 0, "unseen capture ends valid");

    /* D. Through cudart: cudaStreamBeginCapture reaches the hooks through cuGetProcAddress. */
    void *p = NULL, *q = NULL;
    CHECK(cudaStreamBeginCapture(S, GLOBAL) == 0, "cudaStreamBeginCapture");
    graph0 = fake_cuda_count("graph_allocs");
    CHECK(cudaMallocAsync(&p, 1000, S) == 0 && fake_cuda_count("graph_allocs") == graph0 + 1, "cudaMallocAsync during capture reaches the driver");
    in_use = stats().in_use;
    CHECK(cudaMallocAsync(&q, 32 * MIB, T) == 0 && stats().in_use == in_use, "cudart: the pool refuses what needs a driver call");
    CHECK(cudaFreeAsync(q, T) == 0 && cudaFreeAsync(p, S) == 0, "cudaFreeAsync");
    CHECK(cuda_trim() == 0 && fake_cuda_count("illegal") == 0, "cudart: nothing illegal");
    CHECK(cudaStreamEndCapture(S, NULL) == 0, "cudaStreamEndCapture: valid");
    CHECK(cuCtxSynchronize() == 0 && cuda_trim() == 0, "sync and trim after every capture");

    /* E. A global capture in another context forbids unsafe calls in every context. */
    CHECK(cuMemAlloc_v2(&a, 64) == 0 && cuMemFree_v2(a) == 0, "a free in flight in context 0");
    CHECK(cuStreamBeginCapture_v2((void *)0x99, GLOBAL) == 0, "global capture on a stream of context 1");
    in_use = stats().in_use;
    CHECK(cuMemAllocAsync(&y, 64 * MIB, T) == 0 && stats().in_use == in_use, "context 0's pool refuses what needs a driver call");
    cuMemFreeAsync(y, T);
    CHECK(cuda_trim() == 0 && fake_cuda_count("illegal") == 0, "other context: nothing illegal");
    CHECK(cuStreamEndCapture((void *)0x99, NULL) == 0, "the other context's capture ends valid");

    if (failures) { printf("%d failures\n", failures); return 1; }
    puts("all ok");
    return 0;
}
