/*
 * server.c: random-lifetime slots with cross-thread frees.
 *
 * A shared table of 100k slots (x scale) is filled with blocks of 8-1000 B; then 2 threads each
 * run 500k operations (x scale): pick a random slot, allocate a new block, swap it into the slot
 * and free the block it replaces, which the other thread allocated about half the time. Each
 * operation is one request: a region under resizealloc's markers (the new block escapes it).
 * Live set: about 50 MB at scale 1.
 *
 * Prints ops_per_s (the threaded part only) and "result" lines that do not depend on the
 * interleaving of the threads.
 */
#include "membench.h"

#include <pthread.h>

static void **table; /* slots; swapped with __atomic_exchange_n */
static long slots, ops_per_thread;

static size_t block_size(mb_rng *r) { return mb_uniform(r, 8, 1000); }

static void *worker(void *arg) {
    mb_rng r = {(uint64_t)(uintptr_t)arg * 0x1000000007ULL};
    for (long k = 0; k < ops_per_thread; k++) {
        long i = (long)(mb_next(&r) % (uint64_t)slots);
        mb_region_begin();
        void *p = mb_block(block_size(&r), (uint64_t)i);
        void *old = __atomic_exchange_n(&table[i], p, __ATOMIC_ACQ_REL);
        mb_check_free(old, (uint64_t)i);
        mb_region_end();
    }
    return NULL;
}

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    slots = mb_scaled(100000, scale, 1000);
    ops_per_thread = mb_scaled(500000, scale, 10000);
    table = mb_xmalloc((size_t)slots * sizeof *table);
    mb_rng r = {42};
    double t0 = mb_now();
    for (long i = 0; i < slots; i++) table[i] = mb_block(block_size(&r), (uint64_t)i);

    double t1 = mb_now();
    pthread_t th[2];
    for (long t = 0; t < 2; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(t + 1))) return 2;
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    double t2 = mb_now();

    long live_bytes = 0;
    for (long i = 0; i < slots; i++) live_bytes += (long)mb_check(table[i], (uint64_t)i);
    mb_metric("live_kib", (double)live_bytes / 1024.0);
    for (long i = 0; i < slots; i++) free(table[i]);
    free(table);
    printf("result server slots %ld ops %ld checked\n", slots, 2 * ops_per_thread);
    mb_metric("ops_per_s", (double)(2 * ops_per_thread) / (t2 - t1));
    mb_finish(mb_now() - t0);
    return 0;
}
