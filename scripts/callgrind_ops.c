/*
 * callgrind_ops.c: one allocation pattern N times, for scripts/callgrind.sh, which runs it under
 * each allocator with N and with 0 and divides the difference in instructions by N.
 *
 *   callgrind_ops <pattern> <N>
 *
 * Patterns (all but "outside" inside one region; markers looked up with dlsym, no-ops where
 * absent): pair (malloc(80) + free), pair100 (malloc + free of a block spanning 100 granules of
 * 16 KiB, 1.6 MB: a block's cost must not grow with its size; its memory is not touched), lifo64
 * (64 blocks of 16-512 B, freed in reverse; per block), mixed (64 live blocks of 16 B-2 MiB,
 * log-uniform, freed in random order; per block), calloc (calloc(1, 80) + free), realloc
 * (malloc(40), realloc to 80, free), first (malloc(80) without free in a first region: the
 * overflow path), remote (free of a block another thread allocated; per free, the allocation
 * subtracted by the script), outside (malloc(80) + free outside regions), markers (an empty
 * region: begin + end), escape (one region per step that frees a random one of 1024 kept blocks
 * and keeps a new one in its place, as the memory suite's churn does; per step), churn (no
 * regions: free + malloc of a random one of 65536 live blocks of 16-128 B, after 300k steps of
 * warm-up; per step), window (no regions: free + malloc of a random one of 32 temporaries of
 * 16 B-1 KiB, after 100k steps of warm-up; per step).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void (*rb)(void);
static int (*re)(void);
static void begin(void) { if (rb) rb(); }
static void end(void) { if (re) re(); }
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void **blocks;
static long nblocks;
static void *freer(void *arg) {
    (void)arg;
    for (long i = 0; i < nblocks; i++) free(blocks[i]);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) return 1;
    const char *m = argv[1];
    long n = atol(argv[2]);
    *(void **)&rb = dlsym(RTLD_DEFAULT, "resize_region_begin");
    *(void **)&re = dlsym(RTLD_DEFAULT, "resize_region_end");
    unsigned acc = 0;
    if (!strcmp(m, "pair") || !strcmp(m, "outside")) {
        if (!strcmp(m, "pair")) begin();
        for (long i = 0; i < n; i++) { void *volatile p = malloc(80); free(p); }
        if (!strcmp(m, "pair")) end();
    } else if (!strcmp(m, "pair100")) {
        begin();
        for (long i = 0; i < n + 20; i++) { void *volatile p = malloc(100 * 16384 - 64); free(p); }
        end();
    } else if (!strcmp(m, "lifo64") || !strcmp(m, "mixed")) {
        int mixed = !strcmp(m, "mixed");
        char *blk[64];
        int order[64];
        for (long r = 0; r < n / 64 + 20; r++) { /* 20 warm-up regions, cancelled by N=0 */
            begin();
            for (int i = 0; i < 64; i++) {
                size_t k = mixed ? (size_t)exp2(4.0 + 17.0 * (double)(next() >> 11) * 0x1.0p-53)
                                 : 16 + next() % 497;
                blk[i] = malloc(k);
                blk[i][0] = (char)i;
                order[i] = mixed ? i : 63 - i;
            }
            if (mixed)
                for (int i = 63; i > 0; i--) {
                    int j = (int)(next() % (uint64_t)(i + 1)), t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
            for (int i = 0; i < 64; i++) { acc += (unsigned char)blk[order[i]][0]; free(blk[order[i]]); }
            end();
        }
    } else if (!strcmp(m, "calloc")) {
        begin();
        for (long i = 0; i < n; i++) { void *volatile p = calloc(1, 80); free(p); }
        end();
    } else if (!strcmp(m, "realloc")) {
        begin();
        for (long i = 0; i < n; i++) { void *volatile p = malloc(40); p = realloc(p, 80); free(p); }
        end();
    } else if (!strcmp(m, "first") || !strcmp(m, "remote")) {
        blocks = malloc((size_t)(n + 1) * sizeof *blocks);
        nblocks = n;
        begin();
        for (long i = 0; i < n; i++) blocks[i] = malloc(80);
        end();
        pthread_t t;
        if (!strcmp(m, "remote")) { pthread_create(&t, NULL, freer, NULL); pthread_join(t, NULL); }
        else freer(NULL);
    } else if (!strcmp(m, "markers")) {
        for (long i = 0; i < n; i++) { begin(); end(); }
    } else if (!strcmp(m, "escape")) {
        enum { KEPT = 1024 };
        void *kept[KEPT];
        for (int i = 0; i < KEPT; i++) kept[i] = malloc(16 + next() % 113);
        for (long i = 0; i < n; i++) {
            size_t j = next() % KEPT;
            begin();
            free(kept[j]);
            kept[j] = malloc(16 + next() % 113);
            end();
        }
        for (int i = 0; i < KEPT; i++) free(kept[i]);
    } else if (!strcmp(m, "churn")) {
        /* no regions: random replacement in a large live set (long lifetimes: process mode
           learns the site long and routes it away from the arena); 300k steps of warm-up
           run in every count, so the difference is steady state */
        enum { LIVE = 65536, WARM = 300000 };
        void **live = malloc(LIVE * sizeof *live);
        for (int i = 0; i < LIVE; i++) live[i] = malloc(16 + next() % 113);
        for (long i = 0; i < WARM + n; i++) {
            size_t j = next() % LIVE;
            free(live[j]);
            live[j] = malloc(16 + next() % 113);
        }
        for (int i = 0; i < LIVE; i++) free(live[i]);
        free(live);
    } else if (!strcmp(m, "window")) {
        /* no regions: a window of 32 temporaries of 16 B-1 KiB, a random one replaced per step
           (short lifetimes, freed out of order: what process mode once served from the arena,
           and now from the small-block heap); 100k steps of warm-up in every count */
        enum { WINDOW = 32, WARM = 100000 };
        void *win[WINDOW] = {0};
        for (long i = 0; i < WARM + n; i++) {
            size_t j = next() % WINDOW;
            free(win[j]);
            char *p = malloc(16 + next() % 1009);
            p[0] = 1;
            win[j] = p;
        }
        for (int i = 0; i < WINDOW; i++) free(win[i]);
    } else {
        return 1;
    }
    return (int)(acc & 0);
}
