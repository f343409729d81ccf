/* Several threads hammer the hooks against fake_libcuda.c (process mode): cuMemAlloc/cuMemFree,
 * cuMemAllocAsync/cuMemFreeAsync on their own streams and on the per-thread stream, frees of
 * blocks another thread allocated, synchronisations and trims, each block filled with its
 * owner's pattern and checked before its free. No two live blocks may overlap (a block handed
 * out twice fails the check), every free must succeed, the address range must be the block's,
 * and at the end nothing is in use and, after a trim, nothing is left with the driver. */
#include <dlfcn.h>
#include <pthread.h>
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
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, void *);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, void *);
CUresult cuCtxSynchronize(void);
CUresult cuCtxSetCurrent(void *);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
void *fake_cuda_context(int which);
size_t fake_cuda_used(void);
struct cuda_stats { uint64_t pools, reserved, in_use, high_water, overflow_blocks, segments, own_syncs, observed_syncs, driver_allocs, pressure_releases, capture_refusals; };
static int (*cuda_stats_get)(struct cuda_stats *, size_t);
static int (*cuda_trim)(void);

#define THREADS 4
#define ITERS 20000
#define LIVE 16
static long errors;
/* A mailbox per thread: blocks handed to the next thread, which frees them. */
static struct { pthread_mutex_t m; CUdeviceptr p[64]; size_t n[64]; unsigned char v[64]; int count; } box[THREADS];

static int check(CUdeviceptr p, size_t n, unsigned char v) {
    const unsigned char *b = (const unsigned char *)(uintptr_t)p;
    for (size_t i = 0; i < n; i += 61) if (b[i] != v) return 0;
    return b[n - 1] == v;
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    cuCtxSetCurrent(fake_cuda_context(0));
    unsigned seed = 1234u + id;
    CUdeviceptr live[LIVE] = {0};
    size_t size[LIVE] = {0};
    int kind[LIVE] = {0};
    unsigned char val[LIVE] = {0};
    void *stream = (void *)(uintptr_t)(0x1000 + id);
    for (int it = 0; it < ITERS; it++) {
        int k = rand_r(&seed) % LIVE;
        if (live[k]) {
            if (!check(live[k], size[k], val[k])) { __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED); fprintf(stderr, "corrupt block\n"); }
            CUresult r;
            if (rand_r(&seed) % 8 == 0) { /* hand it to the next thread */
                int to = (id + 1) % THREADS;
                pthread_mutex_lock(&box[to].m);
                if (box[to].count < 64) {
                    int c = box[to].count++;
                    box[to].p[c] = live[k]; box[to].n[c] = size[k]; box[to].v[c] = val[k];
                    live[k] = 0;
                }
                pthread_mutex_unlock(&box[to].m);
                if (!live[k]) continue;
            }
            r = kind[k] == 0 ? cuMemFree_v2(live[k]) : kind[k] == 1 ? cuMemFreeAsync(live[k], stream) : cuMemFreeAsync_ptsz(live[k], 0);
            if (r) { __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED); fprintf(stderr, "free failed %d\n", r); }
            live[k] = 0;
        } else {
            size_t n = (size_t)512 << (rand_r(&seed) % 10);
            n += rand_r(&seed) % 512;
            int kd = rand_r(&seed) % 3;
            CUdeviceptr p = 0;
            CUresult r = kd == 0 ? cuMemAlloc_v2(&p, n) : kd == 1 ? cuMemAllocAsync(&p, n, stream) : cuMemAllocAsync_ptsz(&p, n, 0);
            if (r || !p) { __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED); fprintf(stderr, "alloc failed %d\n", r); continue; }
            CUdeviceptr base = 0; size_t len = 0;
            if (cuMemGetAddressRange_v2(&base, &len, p + n / 2) || base != p || len < n) { __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED); fprintf(stderr, "range\n"); }
            unsigned char v = (unsigned char)(id * 50 + it);
            memset((void *)(uintptr_t)p, v, n);
            live[k] = p; size[k] = n; kind[k] = kd; val[k] = v;
        }
        if (it % 997 == 0) cuCtxSynchronize();
        if (it % 4999 == 0 && id == 0) cuda_trim();
        if (it % 64 == 0) { /* free what the previous thread handed over */
            pthread_mutex_lock(&box[id].m);
            for (int c = 0; c < box[id].count; c++) {
                if (!check(box[id].p[c], box[id].n[c], box[id].v[c])) { __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED); fprintf(stderr, "corrupt handed block\n"); }
                if (cuMemFree_v2(box[id].p[c])) { __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED); fprintf(stderr, "cross-thread free failed\n"); }
            }
            box[id].count = 0;
            pthread_mutex_unlock(&box[id].m);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k]) {
            if (!check(live[k], size[k], val[k])) __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
            if (cuMemFree_v2(live[k])) __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
        }
    return NULL;
}

int main(void) {
    cuda_stats_get = (int (*)(struct cuda_stats *, size_t))dlsym(RTLD_DEFAULT, "resize_cuda_stats_get");
    cuda_trim = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_cuda_trim");
    if (!cuda_stats_get || !cuda_trim) { puts("FAIL libresizealloc.so not preloaded"); return 1; }
    if (cuInit(0)) { puts("FAIL cuInit"); return 1; }
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_mutex_init(&box[i].m, NULL);
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++)
        for (int c = 0; c < box[i].count; c++)
            if (cuMemFree_v2(box[i].p[c])) errors++;
    struct cuda_stats s; memset(&s, 0, sizeof s); cuda_stats_get(&s, sizeof s);
    printf("stress: %d threads x %d operations, %lu driver allocations, %lu own syncs, %lu observed syncs\n", THREADS, ITERS,
           (unsigned long)s.driver_allocs, (unsigned long)s.own_syncs, (unsigned long)s.observed_syncs);
    if (s.in_use != 0) { printf("FAIL %lu bytes still in use\n", (unsigned long)s.in_use); errors++; }
    if (cuCtxSynchronize() || cuda_trim()) { puts("FAIL sync/trim"); errors++; }
    if (fake_cuda_used() != 0) { printf("FAIL %zu bytes left with the driver after trim\n", fake_cuda_used()); errors++; }
    if (errors) { printf("%ld errors\n", errors); return 1; }
    puts("all ok");
    return 0;
}
