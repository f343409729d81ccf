/*
 * matrix.c: the region benchmark matrix. Every cell is a loop of regions, each allocating
 * blocks and freeing them in one order; it runs unchanged under any malloc (glibc, or
 * LD_PRELOAD of mimalloc, jemalloc, tcmalloc, libresizealloc.so, the ideal, the sound floor).
 * Region markers are looked up with dlsym(RTLD_DEFAULT, ...); where they are absent (the other
 * allocators) they are no-ops, and the same frees run.
 *
 * Cells are ORDER/SIZES/LIVE:
 *   ORDER  pairs   each block freed right after its allocation (LIVE is 1)
 *          lifo    LIVE blocks, freed last first
 *          fifo    LIVE blocks, freed in allocation order (a Vec of values, a parsed document)
 *          random  LIVE blocks, freed in a random order (the same order every region)
 *          none    LIVE blocks, none freed inside the region: the program frees them after
 *                  its end, in allocation order (a sound allocator keeps every block the
 *                  program has not freed, so this is what "freed at the region end" means
 *                  for it; the timing includes those frees)
 *   SIZES  s128    16-128 bytes, uniform
 *          s512    16-512 bytes, uniform
 *          big     16 bytes to 1 MiB, log-uniform (LIVE 1 and 64: 10,000 such blocks are about
 *                  1 GB per region)
 * and four more:
 *   tree/s48/1023     a binary tree of 1,023 nodes of 48 bytes, freed in post-order (children
 *                     before their parent: how a Box tree drops)
 *   grow/vec/13       a buffer doubled from 16 bytes to 64 KiB with realloc, each new half written
 *   grow/string/256   a buffer grown by 16 bytes at a time to 4 KiB with realloc
 *   grow/mixed/64     64 buffers grown by 16 bytes in turn (no buffer is the last block for long)
 * Every block gets its first 16 bytes written; a block is read back before its free.
 *
 * Build: gcc -std=gnu11 -O2 -o matrix matrix.c -ldl -lm
 * Usage: matrix [--quick] [--only CELL,...]
 * Output: "RESULT <cell> <ns per allocation>" per cell (an allocation and its free, or its
 * realloc step).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*begin_fn)(void);
typedef int (*end_fn)(void);
static begin_fn region_begin_p;
static end_fn region_end_p;
static int region_errors;

static inline void rbegin(void) { if (region_begin_p) region_begin_p(); }
static inline void rend(void) { if (region_end_p && region_end_p() != 0) region_errors++; }

static volatile uint64_t sink;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct { uint64_t s; } rng_t;
static inline uint64_t xs(rng_t *r) {
    uint64_t x = r->s;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return r->s = x;
}

#define MAX_LIVE 10000
static void **blocks;   /* MAX_LIVE */
static size_t *sizes;   /* MAX_LIVE: the size of the i-th allocation of a region */
static unsigned *perm;  /* MAX_LIVE: the free order of `random` */

static void fill_sizes(const char *kind, size_t n, rng_t *r) {
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(kind, "s128")) sizes[i] = 16 + xs(r) % 113;
        else if (!strcmp(kind, "s512")) sizes[i] = 16 + xs(r) % 497;
        else {
            double u = (double)(xs(r) >> 11) / (double)(1ull << 53);
            sizes[i] = (size_t)exp(log(16.0) + u * (log(1048576.0) - log(16.0)));
        }
    }
}

static inline void *touch(void *p) {
    memset(p, 0x5a, 16);
    return p;
}

static inline void check_free(void *p) {
    sink += *(volatile unsigned char *)p;
    free(p);
}

/* One region of ORDER over the first `live` entries of `sizes`. */
static void region_step(int order, size_t live) {
    rbegin();
    if (order == 0) { /* pairs */
        for (size_t i = 0; i < live; i++) check_free(touch(malloc(sizes[i])));
        rend();
        return;
    }
    for (size_t i = 0; i < live; i++) blocks[i] = touch(malloc(sizes[i]));
    switch (order) {
    case 1: for (size_t i = live; i-- > 0;) check_free(blocks[i]); break;
    case 2: for (size_t i = 0; i < live; i++) check_free(blocks[i]); break;
    case 3: for (size_t i = 0; i < live; i++) check_free(blocks[perm[i]]); break;
    default: break;
    }
    rend();
    if (order == 4)
        for (size_t i = 0; i < live; i++) check_free(blocks[i]);
}

struct node { struct node *l, *r; uint64_t v[4]; };

static struct node *build(int depth, uint64_t *n) {
    struct node *t = malloc(sizeof *t);
    t->v[0] = (*n)++;
    t->l = depth ? build(depth - 1, n) : NULL;
    t->r = depth ? build(depth - 1, n) : NULL;
    return t;
}

static void drop(struct node *t) {
    if (!t) return;
    drop(t->l);
    drop(t->r);
    sink += t->v[0];
    free(t);
}

static double run_tree(size_t steps) {
    double t0 = now_ns();
    for (size_t s = 0; s < steps; s++) {
        uint64_t n = 0;
        rbegin();
        drop(build(9, &n));
        rend();
    }
    return (now_ns() - t0) / (double)(steps * 1023);
}

static double run_grow(const char *kind, size_t steps) {
    double t0 = now_ns();
    size_t ops = 0;
    for (size_t s = 0; s < steps; s++) {
        rbegin();
        if (!strcmp(kind, "vec")) {
            char *p = malloc(16);
            memset(p, 1, 16);
            for (size_t cap = 32; cap <= 65536; cap *= 2, ops++) {
                p = realloc(p, cap);
                memset(p + cap / 2, 2, cap / 2);
            }
            check_free(p);
        } else if (!strcmp(kind, "string")) {
            char *p = malloc(16);
            memset(p, 1, 16);
            for (size_t n = 32; n <= 4096; n += 16, ops++) {
                p = realloc(p, n);
                memset(p + n - 16, 3, 16);
            }
            check_free(p);
        } else {
            char *b[64];
            for (int i = 0; i < 64; i++) b[i] = touch(malloc(16));
            for (size_t n = 32; n <= 512; n += 16)
                for (int i = 0; i < 64; i++, ops++) {
                    b[i] = realloc(b[i], n);
                    memset(b[i] + n - 16, 4, 16);
                }
            for (int i = 0; i < 64; i++) check_free(b[i]);
        }
        rend();
    }
    return (now_ns() - t0) / (double)ops;
}

static int wanted(const char *only, const char *cell) {
    if (!only) return 1;
    size_t n = strlen(cell);
    for (const char *p = only; (p = strstr(p, cell)); p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int quick = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    }
    region_begin_p = (begin_fn)dlsym(RTLD_DEFAULT, "resize_region_begin");
    region_end_p = (end_fn)dlsym(RTLD_DEFAULT, "resize_region_end");
    blocks = calloc(MAX_LIVE, sizeof *blocks);
    sizes = calloc(MAX_LIVE, sizeof *sizes);
    perm = calloc(MAX_LIVE, sizeof *perm);
    if (!blocks || !sizes || !perm) return 1;

    static const char *orders[] = {"pairs", "lifo", "fifo", "random", "none"};
    static const char *kinds[] = {"s128", "s512", "big"};
    static const size_t lives[] = {64, 10000};
    double scale = quick ? 0.1 : 1.0;
    for (int k = 0; k < 3; k++) {
        for (int o = 0; o < 5; o++) {
            for (int l = 0; l < 2; l++) {
                size_t live = o == 0 ? (l ? 0 : 1) : lives[l];
                if (!live || (k == 2 && live > 64)) continue;
                char cell[64];
                snprintf(cell, sizeof cell, "%s/%s/%zu", orders[o], kinds[k], live);
                if (!wanted(only, cell)) continue;
                rng_t r = {0x9E3779B97F4A7C15ull + (uint64_t)k};
                /* A pair region of `per` allocations: as many allocations per region as a
                 * region of 64 live blocks, so that the cells compare per allocation. */
                size_t per = o == 0 ? 64 : live;
                fill_sizes(kinds[k], per, &r);
                for (size_t i = 0; i < per; i++) perm[i] = (unsigned)i;
                for (size_t i = per; i > 1; i--) {
                    size_t j = xs(&r) % i;
                    unsigned t = perm[i - 1]; perm[i - 1] = perm[j]; perm[j] = t;
                }
                size_t total = (size_t)((k == 2 ? 2e5 : 2e6) * scale);
                size_t steps = total / per + 1;
                region_step(o, per); /* warm-up: the arena's first region resizes it */
                double t0 = now_ns();
                for (size_t s = 0; s < steps; s++) region_step(o, per);
                double ns = (now_ns() - t0) / (double)(steps * per);
                printf("RESULT %s %.2f ns\n", cell, ns);
                fflush(stdout);
            }
        }
    }
    size_t steps = (size_t)(2000 * scale) + 1;
    if (wanted(only, "tree/s48/1023")) {
        run_tree(1);
        printf("RESULT tree/s48/1023 %.2f ns\n", run_tree(steps));
    }
    static const char *grows[] = {"vec", "string", "mixed"};
    static const char *grow_cells[] = {"grow/vec/13", "grow/string/256", "grow/mixed/64"};
    static const size_t grow_steps[] = {20000, 4000, 500};
    for (int g = 0; g < 3; g++) {
        if (!wanted(only, grow_cells[g])) continue;
        run_grow(grows[g], 1);
        printf("RESULT %s %.2f ns\n", grow_cells[g],
               run_grow(grows[g], (size_t)(grow_steps[g] * scale) + 1));
        fflush(stdout);
    }
    if (region_errors) { fprintf(stderr, "region errors: %d\n", region_errors); return 1; }
    return 0;
}
