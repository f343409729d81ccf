/*
 * calloc.c: one huge zeroed block, barely touched; then half that size, again and again.
 *
 * calloc(1, 512 MiB x scale); checks that a few sampled bytes are zero, writes the first and
 * the last byte, frees. Under glibc the block comes straight from mmap, so only the pages
 * touched count; an allocator that memsets (or hands back dirty memory) pays the whole block.
 * Then 20 rounds (or argv[2]) of the same with 256 MiB x scale, each in a region, each block
 * over the memory the last one wrote: repeat_per_s is their rate (an allocator that clears
 * reused memory by writing it pays 256 MiB of page faults a round). Then 20 rounds of 64 MiB x
 * scale written whole (filled_per_s: an allocator that maps each block fresh pays its page
 * faults every round). Under resizealloc's markers every calloc is inside a region.
 */
#include "membench.h"

/* `rounds` callocs of `size` bytes, each in a region, checked zero where the last one wrote,
 * then written (both ends, or whole when `fill`) and freed; returns callocs per second. */
static double callocs_per_s(size_t size, long rounds, int fill) {
    double t = mb_now();
    for (long r = 0; r < rounds; r++) {
        mb_region_begin();
        unsigned char *volatile q = calloc(1, size);
        if (!q) {
            fprintf(stderr, "membench: calloc(1, %zu) returned NULL\n", size);
            exit(2);
        }
        if (q[0] || q[1] || q[size / 3] || q[size / 2] || q[size - 1])
            mb_corrupt("reused calloc memory not zero", (uint64_t)r, (void *)q, 0);
        if (fill) {
            memset((void *)q, (int)(r + 1), size);
        } else {
            q[0] = 1;
            q[size - 1] = 2;
        }
        free((void *)q);
        mb_region_end();
    }
    return (double)rounds / (mb_now() - t);
}

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
    double one_shot_s = mb_now() - t0;

    long rounds = argc > 2 ? atol(argv[2]) : 20;
    /* 256 MiB x scale, both ends written: each block lies over the memory the last one wrote. */
    double sparse = callocs_per_s(n / 2, rounds, 0);
    /* 64 MiB x scale, each block written whole (a buffer cleared and filled every step):
     * clearing memory the program keeps using by writing it is cheaper than giving it back
     * and faulting it in again. */
    double filled = callocs_per_s(n / 8, rounds, 1);
    if (rounds > 0) {
        mb_metric("repeat_per_s", sparse);
        mb_metric("filled_per_s", filled);
    }
    printf("result calloc bytes %zu rounds %ld\n", n, rounds);
    mb_finish(one_shot_s); /* elapsed_s: the one huge block alone */
    return 0;
}
