/*
 * trim_cost.c: what giving a freed 500 MB phase back to the kernel costs, under plain glibc.
 *
 *   gcc -O2 -o trim_cost scripts/trim_cost.c -lm && ./trim_cost
 *
 * The memory suite's `phase` (scripts/membench/phase.c) allocates 500 MB in blocks of 1-64 KiB
 * (log-uniform), frees them in random order, then does small steady work. glibc keeps the whole
 * phase resident (a small block above it pins its heap's top); resizealloc's process mode sends
 * those long-lived blocks to glibc and then asks it to give the free memory back
 * (`malloc_trim(0)`), so that RSS after the phase is at most 64 MB. This program times
 * that `malloc_trim(0)` alone, the same blocks in the same order: the time process mode pays on
 * the phase program that glibc does not.
 */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned long long rng = 17;
static unsigned long long next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

enum { CAP = 40000 };
static void *blocks[CAP];

int main(void) {
    long n = 0, total = 0;
    while (total < (500L << 20) && n < CAP) {
        double u = (double)(next() % 1000000) / 1e6;
        size_t size = (size_t)(1024.0 * exp2(u * 6.0));
        blocks[n] = malloc(size);
        memset(blocks[n], 1, size);
        total += (long)size;
        n++;
    }
    void *pin = malloc(100); /* above the phase, as the phase program's stdout buffer is */
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(next() % (unsigned long long)(i + 1));
        void *t = blocks[i];
        blocks[i] = blocks[j];
        blocks[j] = t;
    }
    double t0 = now();
    for (long i = 0; i < n; i++) free(blocks[i]);
    double t1 = now();
    malloc_trim(0);
    double t2 = now();
    printf("blocks %ld, %ld MiB: free %.1f ms, malloc_trim(0) %.1f ms\n", n, total >> 20,
           (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    free(pin);
    return 0;
}
