/* demo_app: a plain C program that marks its repeated work with regions when libresizealloc.so
 * is present (found with dlsym, so the same binary runs without it) and does the same work
 * either way. Prints the time per iteration and a checksum that must not depend on the allocator. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void nop(void) {}
static int nop_end(void) { return 0; }

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 20000;
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    int (*end)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    if (!begin || !end) { begin = nop; end = nop_end; }
    uint64_t x = 88172645463325252ull, checksum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long it = 0; it < iterations; it++) {
        begin();
        /* a solver-like iteration: temporaries of mixed sizes, some kept until the end */
        void *keep[32];
        for (int i = 0; i < 256; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            size_t n = 16 + (x % 4) * (x % 4) * (x % 997);
            unsigned char *p = malloc(n);
            p[0] = (unsigned char)x; p[n - 1] = (unsigned char)(x >> 8);
            checksum += p[0] + p[n - 1];
            if (i % 8 == 0) keep[i / 8] = p; else free(p);
        }
        double *work = malloc(1 << 20);
        for (int i = 0; i < (1 << 17); i += 512) work[i] = i;
        checksum += (uint64_t)work[512];
        free(work);
        for (int i = 0; i < 32; i++) free(keep[i]);
        end();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / iterations;
    printf("demo_app: %ld iterations, %.2f us per iteration, checksum %llu, regions %s\n", iterations, us,
           (unsigned long long)checksum, begin == nop ? "unavailable (plain malloc)" : "marked");
    return 0;
}
