/*
 * phase.c: a big phase, then small steady work.
 *
 * Phase: blocks of 1-64 KiB (log-uniform) until 500 MB (x scale) are live, all filled, then all
 * checked and freed in random order; under resizealloc's markers the phase is one region.
 * Steady: a live set of 2,000 blocks of 16-512 B and 1M replacement steps (x scale, at least
 * 200k), each step a region. Prints rss_after_kib (VmRSS after the steady work: what the
 * allocator kept from the phase) and hwm_kib (the peak).
 */
#include "membench.h"

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    long phase_bytes = mb_scaled(500L << 20, scale, 8L << 20);
    long steady_steps = mb_scaled(1000000, scale, 200000);
    long cap = phase_bytes / 1024 + 1, n = 0, total = 0;
    void **blocks = mb_xmalloc((size_t)cap * sizeof *blocks);
    mb_rng r = {17};
    double t0 = mb_now();

    mb_region_begin();
    while (total < phase_bytes && n < cap) {
        size_t sz = mb_log_uniform(&r, 1024, 65536);
        blocks[n] = mb_block(sz, (uint64_t)n);
        total += (long)sz;
        n++;
    }
    mb_metric("phase_blocks", (double)n);
    mb_metric("rss_phase_kib", (double)mb_status_kib("VmRSS"));
    long *order = mb_xmalloc((size_t)n * sizeof *order); /* free in random order */
    for (long i = 0; i < n; i++) order[i] = i;
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(mb_next(&r) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    long freed = 0;
    for (long i = 0; i < n; i++) freed += (long)mb_check_free(blocks[order[i]], (uint64_t)order[i]);
    free(order);
    mb_region_end();
    double t1 = mb_now();

    enum { LIVE = 2000 };
    void *live[LIVE];
    uint64_t gen[LIVE];
    for (int i = 0; i < LIVE; i++) {
        gen[i] = (uint64_t)i << 32;
        live[i] = mb_block(mb_uniform(&r, 16, 512), gen[i]);
    }
    for (long k = 0; k < steady_steps; k++) {
        int i = (int)(mb_next(&r) % LIVE);
        mb_region_begin();
        mb_check_free(live[i], gen[i]);
        gen[i]++;
        live[i] = mb_block(mb_uniform(&r, 16, 512), gen[i]);
        mb_region_end();
    }
    double t2 = mb_now();
    mb_metric("rss_after_kib", (double)mb_status_kib("VmRSS"));
    long steady_bytes = 0;
    for (int i = 0; i < LIVE; i++) steady_bytes += (long)mb_check_free(live[i], gen[i]);
    free(blocks);
    printf("result phase blocks %ld bytes %ld freed %ld steady_bytes %ld\n", n, total, freed,
           steady_bytes);
    if (freed != total) return 3;
    mb_metric("phase_s", t1 - t0);
    mb_metric("steady_ops_per_s", (double)steady_steps / (t2 - t1));
    mb_finish(mb_now() - t0);
    return 0;
}
