/*
 * calloc.c: one huge zeroed block, barely touched.
 *
 * calloc(1, 512 MiB x scale); checks that a few sampled bytes are zero, writes the first and
 * the last byte, frees. Under glibc the block comes straight from mmap, so only the pages
 * touched count; an allocator that memsets (or hands back dirty memory) pays the whole block.
 * Under resizealloc's markers the calloc is inside a region.
 */
#include "membench.h"

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    size_t n = (size_t)mb_scaled(512L << 20, scale, 1L << 20);
    double t0 = mb_now();
    mb_region_begin();
    unsigned char *p = calloc(1, n);
    if (!p) {
        fprintf(stderr, "membench: calloc(1, %zu) returned NULL\n", n);
        return 2;
    }
    for (size_t i = 0; i < n; i += 64u << 20)
        if (p[i]) mb_corrupt("calloc memory not zero", 0, p, i);
    if (p[n - 1] || p[n / 2 + 1]) mb_corrupt("calloc memory not zero", 0, p, n - 1);
    p[0] = 1;
    p[n - 1] = 2;
    mb_metric("rss_touched_kib", (double)mb_status_kib("VmRSS"));
    if (p[0] + p[n - 1] != 3) return 3;
    free(p);
    mb_region_end();
    printf("result calloc bytes %zu\n", n);
    mb_finish(mb_now() - t0);
    return 0;
}
