/*
 * freed_phase.c: a large phase of big blocks, all freed, then small work only.
 *
 * 100 blocks of 5 MiB (x scale, at least 8) are allocated, filled, checked and freed; then the
 * program does only small steady work for 2.5 s: 100-byte malloc/free pairs, 10 at a time with
 * a 10 ms sleep in between (about 1,000 allocations a second). Prints rss_phase_kib (with the blocks live), rss_1s_kib and
 * rss_2500ms_kib (VmRSS 1 s and 2.5 s into the steady work: what the allocator still keeps).
 */
#include "membench.h"

static void steady_until(double until) {
    while (mb_now() < until) {
        for (int i = 0; i < 10; i++) {
            char *p = mb_xmalloc(100);
            p[0] = (char)i;
            p[99] = (char)i;
            if (p[0] != (char)i) mb_corrupt("small", (uint64_t)i, p, 0);
            free(p);
        }
        usleep(10000);
    }
}

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    long n = mb_scaled(100, scale, 8);
    void **blocks = mb_xmalloc((size_t)n * sizeof *blocks);
    double t0 = mb_now();
    for (long i = 0; i < n; i++) blocks[i] = mb_block(5u << 20, (uint64_t)i);
    mb_metric("rss_phase_kib", (double)mb_status_kib("VmRSS"));
    size_t freed = 0;
    for (long i = 0; i < n; i++) freed += mb_check_free(blocks[i], (uint64_t)i);
    free(blocks);
    printf("result freed %zu bytes\n", freed);
    double t1 = mb_now();
    steady_until(t1 + 1.0);
    mb_metric("rss_1s_kib", (double)mb_status_kib("VmRSS"));
    steady_until(t1 + 2.5);
    mb_metric("rss_2500ms_kib", (double)mb_status_kib("VmRSS"));
    mb_finish(mb_now() - t0);
    return 0;
}
