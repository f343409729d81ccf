/*
 * handoff.c: objects of mixed lifetimes handed between threads.
 *
 * 4 threads, 200 rounds (x scale, at least 20). In each round every thread allocates 2,000
 * objects of 16 B-4 KiB (log-uniform) into its own table, then the tables rotate to the next
 * thread, which checks them and frees two thirds (chosen at random), keeping the rest for
 * later rounds (at most 6,000 kept per table, the oldest freed first). Prints ops_per_s.
 */
#include "membench.h"

#include <pthread.h>

#define THREADS 4
#define PER_ROUND 2000
#define KEEP 6000

struct obj {
    void *p;
    uint64_t key;
};

struct table {
    struct obj fresh[PER_ROUND];
    struct obj kept[KEEP];
    long nkept, head;
};

static struct table tables[THREADS];
static pthread_barrier_t barrier;
static long rounds;

static void keep(struct table *t, struct obj o) {
    if (t->nkept == KEEP) { /* full: the oldest goes */
        mb_check_free(t->kept[t->head].p, t->kept[t->head].key);
        t->kept[t->head] = o;
        t->head = (t->head + 1) % KEEP;
        return;
    }
    t->kept[(t->head + t->nkept++) % KEEP] = o;
}

static void *worker(void *arg) {
    long id = (long)(uintptr_t)arg;
    mb_rng r = {(uint64_t)id * 104729 + 3};
    for (long round = 0; round < rounds; round++) {
        struct table *mine = &tables[(id + round) % THREADS];
        for (int i = 0; i < PER_ROUND; i++) {
            uint64_t key = ((uint64_t)round << 40) | ((uint64_t)id << 32) | (uint64_t)i;
            mine->fresh[i].key = key;
            mine->fresh[i].p = mb_block(mb_log_uniform(&r, 16, 4096), key);
        }
        pthread_barrier_wait(&barrier);
        /* The next thread's table of this round: made by another thread. */
        struct table *theirs = &tables[(id + round + 1) % THREADS];
        for (int i = 0; i < PER_ROUND; i++) {
            if (mb_next(&r) % 3 == 0) keep(theirs, theirs->fresh[i]);
            else mb_check_free(theirs->fresh[i].p, theirs->fresh[i].key);
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    rounds = mb_scaled(200, scale, 20);
    pthread_barrier_init(&barrier, NULL, THREADS);
    double t0 = mb_now();
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    long left = 0;
    for (int i = 0; i < THREADS; i++)
        for (long k = 0; k < tables[i].nkept; k++) {
            struct obj o = tables[i].kept[(tables[i].head + k) % KEEP];
            mb_check_free(o.p, o.key);
            left++;
        }
    double t1 = mb_now();
    printf("result %ld objects kept to the end\n", left);
    mb_metric("ops_per_s", (double)rounds * THREADS * PER_ROUND / (t1 - t0));
    mb_finish(t1 - t0);
    return 0;
}
