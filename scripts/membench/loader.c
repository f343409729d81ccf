/*
 * loader.c: a long-lived table built between temporaries.
 *
 * 100,000 records (x scale). Each record is one region under resizealloc's markers: two
 * temporaries of 16 B-4 KiB, the record itself (16-216 B, kept), two more temporaries; the four
 * temporaries are freed before the next record. The records live until the end (about 12 MB);
 * they are checked and freed then.
 */
#include "membench.h"

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    long n = mb_scaled(100000, scale, 1000);
    void **records = mb_xmalloc((size_t)n * sizeof *records);
    mb_rng r = {7};
    double t0 = mb_now();
    for (long i = 0; i < n; i++) {
        void *tmp[4];
        uint64_t tk = (uint64_t)i << 3;
        mb_region_begin();
        tmp[0] = mb_block(mb_log_uniform(&r, 16, 4096), tk + 1);
        tmp[1] = mb_block(mb_log_uniform(&r, 16, 4096), tk + 2);
        records[i] = mb_block(mb_uniform(&r, 16, 216), tk);
        tmp[2] = mb_block(mb_log_uniform(&r, 16, 4096), tk + 3);
        tmp[3] = mb_block(mb_log_uniform(&r, 16, 4096), tk + 4);
        for (int k = 0; k < 4; k++) mb_check_free(tmp[k], tk + 1 + (uint64_t)k);
        mb_region_end();
    }
    double t1 = mb_now();
    long live_bytes = 0;
    for (long i = 0; i < n; i++) live_bytes += (long)mb_check(records[i], (uint64_t)i << 3);
    mb_metric("live_kib", (double)live_bytes / 1024.0);
    mb_metric("hwm_loaded_kib", (double)mb_status_kib("VmHWM"));
    for (long i = 0; i < n; i++) free(records[i]);
    free(records);
    printf("result loader records %ld bytes %ld\n", n, live_bytes);
    mb_metric("records_per_s", (double)n / (t1 - t0));
    mb_finish(mb_now() - t0);
    return 0;
}
