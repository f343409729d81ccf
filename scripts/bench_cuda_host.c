/* bench_cuda_host.c: the host-side cost of the device pool hooks, without a GPU. Linked with
 * the fake cudart and fake libcuda of preload/tests/c/cuda (host memory, trivial context
 * lookups), so under LD_PRELOAD=libresizealloc.so RESIZEALLOC_REGION=process a cudaMalloc(10)
 * + cudaFree pair measures our path alone: the export, the context lookup, the lock and the
 * best-fit pool (with its own sync once per batch of frees). The same program with
 * RESIZEALLOC_CUDA=off measures the fake cudart + fake driver, for scale only.
 * Output: "RESULT <name> <ns>" lines. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMallocAsync(void **, size_t, void *);
cudaError_t cudaFreeAsync(void *, void *);
cudaError_t cudaDeviceSynchronize(void);

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 1000000;
    void *p;
    if (cudaFree(NULL) || cudaMalloc(&p, 10) || cudaFree(p)) { puts("FAIL init"); return 1; }
    for (int i = 0; i < iters / 10; i++) { cudaMalloc(&p, 10); cudaFree(p); } /* warm up */

    double t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        if (cudaMalloc(&p, 10) || cudaFree(p)) { puts("FAIL pair"); return 1; }
    }
    printf("RESULT pair_10B %.1f\n", (now_ns() - t0) / iters);

    t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        if (cudaMalloc(&p, 10) || cudaFree(p) || cudaDeviceSynchronize()) { puts("FAIL sync loop"); return 1; }
    }
    printf("RESULT alloc_free_sync_10B %.1f\n", (now_ns() - t0) / iters);

    t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        if (cudaMallocAsync(&p, 4096, (void *)7) || cudaFreeAsync(p, (void *)7)) { puts("FAIL async"); return 1; }
    }
    printf("RESULT async_pair_4KiB %.1f\n", (now_ns() - t0) / iters);
    return 0;
}
