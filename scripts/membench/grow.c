/*
 * grow.c: a buffer grown by realloc, step by step.
 *
 * Three times: realloc a buffer from 64 KiB to 256 MiB (x scale) in 64 KiB steps, writing the
 * first and the last byte of every new step, then check a sample of them and free it. glibc
 * serves it with mmap and then mremap, which moves page tables instead of copying; an
 * allocator that copies the buffer into fresh memory at every step pays O(n^2) bytes and the
 * page faults. Under resizealloc's markers the whole run is one region.
 */
#include "membench.h"

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    size_t total = (size_t)mb_scaled(256L << 20, scale, 1L << 20), step = 64u << 10;
    double t0 = mb_now();
    uint64_t steps = 0;
    mb_region_begin();
    for (int rep = 0; rep < 3; rep++) {
        unsigned char *p = NULL;
        size_t n = 0;
        while (n < total) {
            unsigned char *q = realloc(p, n + step);
            if (!q) {
                fprintf(stderr, "membench: realloc(%zu) returned NULL\n", n + step);
                return 2;
            }
            p = q;
            p[n] = (unsigned char)(n >> 16);
            p[n + step - 1] = (unsigned char)(rep + 1);
            n += step;
            steps++;
        }
        for (size_t at = 0; at < n; at += 16 * step)
            if (p[at] != (unsigned char)(at >> 16) || p[at + step - 1] != (unsigned char)(rep + 1))
                mb_corrupt("realloc lost the buffer", (uint64_t)rep, p, at);
        free(p);
    }
    mb_region_end();
    double t = mb_now() - t0;
    mb_metric("steps_per_s", (double)steps / t);
    printf("result grow bytes %zu steps %llu\n", total, (unsigned long long)steps);
    mb_finish(t);
    return 0;
}
