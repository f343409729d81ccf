/*
 * churn.c: random churn over a fixed live set.
 *
 *   churn [scale] [small|log]
 * small: 20,000 live blocks (x scale) of 16-128 B, 2M steps (x scale).
 * log:   20,000 live blocks (x scale) of 16 B-64 KiB, log-uniform (about 160 MB live at
 *        scale 1), 200k steps (x scale).
 * Each step is one region under resizealloc's markers that replaces a random block (the
 * replacement escapes the region): three steps in four check it, free it and malloc the new
 * one; one in eight callocs the new one instead (and checks that it is zero); one in eight
 * reallocs the old block to the new size (and checks that the common prefix survived).
 */
#include "membench.h"

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    int log_sizes = argc > 2 && !strcmp(argv[2], "log");
    if (argc > 2 && !log_sizes && strcmp(argv[2], "small")) {
        fprintf(stderr, "usage: %s [scale] [small|log]\n", argv[0]);
        return 1;
    }
    mb_init();
    long live = mb_scaled(20000, scale, 500);
    long steps = mb_scaled(log_sizes ? 200000 : 2000000, scale, 10000);
    size_t hi = log_sizes ? 65536 : 128;
    void **slot = mb_xmalloc((size_t)live * sizeof *slot);
    uint64_t *gen = calloc((size_t)live, sizeof *gen); /* key = slot + generation */
    if (!gen) return 2;
    mb_rng r = {log_sizes ? 11 : 13};
#define KEY(i) (((uint64_t)(i) << 24) ^ gen[i])
#define SIZE() (log_sizes ? mb_log_uniform(&r, 16, hi) : mb_uniform(&r, 16, hi))
    double t0 = mb_now();
    for (long i = 0; i < live; i++) slot[i] = mb_block(SIZE(), KEY(i));
    double t1 = mb_now();
    for (long k = 0; k < steps; k++) {
        long i = (long)(mb_next(&r) % (uint64_t)live);
        uint64_t kind = mb_next(&r) % 8;
        size_t n = SIZE();
        mb_region_begin();
        size_t old = mb_check(slot[i], KEY(i));
        if (kind == 0) { /* calloc */
            free(slot[i]);
            unsigned char *p = calloc(1, n);
            if (!p) return 2;
            for (size_t j = 0; j < n; j++)
                if (p[j]) mb_corrupt("calloc memory not zero", KEY(i), p, j);
            slot[i] = p;
        } else if (kind == 1) { /* realloc */
            size_t keep = old < n ? old : n;
            uint64_t before = mb_sum(slot[i], keep);
            void *p = realloc(slot[i], n);
            if (!p) return 2;
            if (mb_sum(p, keep) != before) mb_corrupt("realloc lost the prefix", KEY(i), p, 0);
            slot[i] = p;
        } else {
            free(slot[i]);
            slot[i] = mb_xmalloc(n);
        }
        gen[i]++;
        mb_fill(slot[i], n, KEY(i));
        mb_region_end();
    }
    double t2 = mb_now();
    long live_bytes = 0;
    for (long i = 0; i < live; i++) live_bytes += (long)mb_check_free(slot[i], KEY(i));
    free(slot);
    free(gen);
    printf("result churn-%s live %ld steps %ld final_bytes %ld\n", log_sizes ? "log" : "small",
           live, steps, live_bytes);
    mb_metric("live_kib", (double)live_bytes / 1024.0);
    mb_metric("ops_per_s", (double)steps / (t2 - t1));
    mb_finish(mb_now() - t0);
    return 0;
}
