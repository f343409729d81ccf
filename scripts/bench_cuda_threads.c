/* bench_cuda_threads.c: do cudaMalloc(10)+cudaFree pairs scale with threads? Each thread runs
 * ITERS pairs on its own (against the fake cudart and fake driver of preload/tests/c/cuda, so
 * only the host path is measured); the program prints the wall time per pair for the whole
 * process and the throughput ratio against a single-thread run done first.
 * Output: "RESULT threads=<n> ns_per_pair=<t> speedup=<s>" lines.
 * Usage: bench_cuda_threads ITERS MAX_THREADS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);

static int iters;
static pthread_barrier_t start;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static void *worker(void *arg) {
    (void)arg;
    void *p;
    for (int i = 0; i < 1000; i++) { cudaMalloc(&p, 10); cudaFree(p); } /* warm up, bind the context */
    pthread_barrier_wait(&start);
    for (int i = 0; i < iters; i++) {
        if (cudaMalloc(&p, 10) || cudaFree(p)) { puts("FAIL pair"); exit(1); }
    }
    return NULL;
}

static double run(int n) {
    pthread_t t[64];
    pthread_barrier_init(&start, NULL, n + 1);
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
    pthread_barrier_wait(&start);
    double t0 = now();
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    double dt = now() - t0;
    pthread_barrier_destroy(&start);
    return dt;
}

int main(int argc, char **argv) {
    iters = argc > 1 ? atoi(argv[1]) : 2000000;
    int max = argc > 2 ? atoi(argv[2]) : 2;
    void *p;
    if (cudaFree(NULL) || cudaMalloc(&p, 10) || cudaFree(p)) { puts("FAIL init"); return 1; }
    double one = run(1);
    printf("RESULT threads=1 ns_per_pair=%.1f speedup=1.00\n", one * 1e9 / iters);
    for (int n = 2; n <= max; n++) {
        double dt = run(n);
        printf("RESULT threads=%d ns_per_pair=%.1f speedup=%.2f\n", n, dt * 1e9 / ((double)iters * n), one * n / dt);
    }
    return 0;
}
