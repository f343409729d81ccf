/* The inline paths of malloc and free (on x86-64 Linux, the assembly entry points of
 * preload/src/entry_x86_64.rs; elsewhere the arena's Rust fast paths): what each must do, seen from
 * outside. A bump in a region, LIFO and FIFO frees that take the bump pointer back, the peak a
 * LIFO free notes, the region's allocation count, the sizes at the small path's edges, and the
 * cases the inline free leaves to the general path (a release that goes on down over freed
 * blocks, across the gap header in front of a line-aligned block; a free by a thread that has
 * no arena), and the range's last live block freed above freed blocks or padding.
 * Runs under LD_PRELOAD=libresizealloc.so (also the one built with the core crate's
 * check-invariants feature, which walks the arena after every operation of the Rust paths);
 * prints "ok <check>" lines and "all ok", or "FAIL" lines and exits 1. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

static int failures;
#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (cond) { printf("ok "); printf(__VA_ARGS__); printf("\n"); }                        \
        else {                                                                                 \
            printf("FAIL line %d: ", __LINE__); printf(__VA_ARGS__); printf("\n");            \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

static void *remote_blocks[2];

static void *free_remote_blocks(void *arg) {
    (void)arg;
    free(remote_blocks[1]);
    free(remote_blocks[0]);
    return NULL;
}

static struct resize_thread_stats thread_stats(void) {
    struct resize_stats s;
    resize_stats_get(&s, sizeof s);
    return s.thread;
}

/* A region that allocates `n` bytes and frees them, so that the arena is warm (its capacity
 * planned) for the checks below, which must not take the slow path by surprise. */
static void warm(size_t n) {
    for (int i = 0; i < 3; i++) {
        resize_region_begin();
        void *p = malloc(n);
        memset(p, 1, n);
        free(p);
        resize_region_end();
    }
}

/* Blocks a region left live stay uncounted into the next region (they are carried: the
 * region's peak, a temporary of 3/4 of what warm() planned, is one the capacity keeps), and
 * their last LIFO free, outside any region, ends that: the memory comes back, and the next
 * region's peak counts from where they began. */
static void *free_carried_blocks(void *arg) {
    (void)arg;
    warm(1 << 20);
    resize_region_begin();
    char *temporary = malloc(3 << 18);
    memset(temporary, 7, 3 << 18);
    free(temporary);
    char *k1 = malloc(200), *k2 = malloc(300);
    memset(k1, 8, 200); memset(k2, 9, 300);
    uintptr_t k1_at = (uintptr_t)k1;
    resize_region_end();
    free(k2);
    free(k1);
    resize_region_begin();
    char *next = malloc(1000);
    next[0] = 1;
    CHECK((uintptr_t)next == k1_at, "the carried blocks' memory comes back at their last free");
    free(next);
    resize_region_end();
    CHECK(thread_stats().high_water == 1024,
          "the peak after the carried blocks' last free counts from where they began (%llu)",
          (unsigned long long)thread_stats().high_water);
    return NULL;
}

/* The range's last live block freed when it is not the range's first: the blocks below it in
 * the range are freed already, or only alignment padding lies there (a block of a page or more
 * starts on a cache line). The bump pointer goes back to where the range began, and the peak
 * the free notes is the block's end. For blocks of 16 to 64 bytes in front of the large one,
 * with and without the padding, and with no block in front of it at all. On a thread of its
 * own, whose arena holds nothing else live. */
static void *free_last_above_freed(void *arg) {
    (void)arg;
    warm(1 << 16);
    int gaps = 0;
    for (size_t asz = 0; asz <= 64; asz += 16) {
        resize_region_begin();
        char *s = malloc(16);
        uintptr_t start = (uintptr_t)s - 16; /* the range's start: `s` is its first block */
        free(s);
        char *a = asz ? malloc(asz) : NULL, *big = malloc(8192);
        if (a) memset(a, 11, asz);
        memset(big, 12, 8192);
        gaps += (uintptr_t)big - 16 != (a ? ((uintptr_t)a + asz + 15) & ~(uintptr_t)15 : start);
        uintptr_t big_end = (uintptr_t)big + 8192;
        free(a);
        free(big);
        char *n = malloc(16);
        CHECK((uintptr_t)n == start + 16,
              "%zu bytes freed below a line-aligned block: its free goes back to the range's start",
              asz);
        free(n);
        resize_region_end();
        CHECK(thread_stats().high_water == big_end - start,
              "%zu bytes below a line-aligned block: the peak is its end (%llu)", asz,
              (unsigned long long)thread_stats().high_water);
    }
    CHECK(gaps > 0, "padding lay below the line-aligned block %d times", gaps);
    return NULL;
}

int main(void) {
    warm(1 << 20);

    /* 1. A LIFO pair: the free takes the bump pointer back, the next malloc gets the block. */
    resize_region_begin();
    char *p = malloc(80);
    memset(p, 2, 80);
    uintptr_t p_at = (uintptr_t)p; /* addresses of freed blocks are compared as numbers */
    free(p);
    char *q = malloc(80);
    CHECK((uintptr_t)q == p_at, "a LIFO pair reuses its block");
    CHECK(((uintptr_t)q & 15) == 0, "blocks are 16-byte aligned");
    free(q);
    resize_region_end();

    /* 2. Three blocks freed in reverse, then in order (the last free releases all three). */
    for (int fifo = 0; fifo < 2; fifo++) {
        resize_region_begin();
        char *a = malloc(100), *b = malloc(200), *c = malloc(50);
        memset(a, 3, 100); memset(b, 4, 200); memset(c, 5, 50);
        CHECK(a < b && b < c, "%s: bumped in address order", fifo ? "FIFO" : "LIFO");
        uintptr_t a_at = (uintptr_t)a;
        if (fifo) { free(a); free(b); free(c); } else { free(c); free(b); free(a); }
        char *d = malloc(16);
        CHECK((uintptr_t)d == a_at, "%s: after three frees the bump pointer is back at the start",
              fifo ? "FIFO" : "LIFO");
        free(d);
        resize_region_end();
    }

    /* 3. The peak a LIFO free notes: one pair of 1000 bytes needs 16 + 1000 rounded up to 16. */
    resize_region_begin();
    for (int i = 0; i < 10; i++) { char *r = malloc(1000); r[0] = 1; free(r); }
    resize_region_end();
    CHECK(thread_stats().high_water == 1024, "the peak of a pair loop is one block (%llu)",
          (unsigned long long)thread_stats().high_water);
    resize_region_begin();
    for (int i = 0; i < 4; i++) { char *r = malloc(80); r[0] = 1; }
    resize_region_end();
    CHECK(thread_stats().high_water == 4 * 96, "the peak of four kept blocks (%llu)",
          (unsigned long long)thread_stats().high_water);

    /* 4. Every malloc in a region is counted. */
    uint64_t before = thread_stats().region_allocs;
    resize_region_begin();
    for (int i = 0; i < 100; i++) { char *r = malloc(24); r[0] = 1; free(r); }
    char *big = malloc(10000);
    free(big);
    resize_region_end();
    CHECK(thread_stats().region_allocs - before == 101, "101 allocations counted (%llu)",
          (unsigned long long)(thread_stats().region_allocs - before));

    /* 5. The small path's edges: a page less one is small (16-byte aligned), a page starts on a
     * cache line; 0 bytes gets a block of its own. */
    resize_region_begin();
    char *s1 = malloc(4095), *s2 = malloc(4096), *z1 = malloc(0), *z2 = malloc(0);
    CHECK(s1 && ((uintptr_t)s1 & 15) == 0, "4095 bytes: 16-byte aligned");
    CHECK(s2 && ((uintptr_t)s2 & 63) == 0, "4096 bytes: on a cache line");
    CHECK(z1 && z2 && z1 != z2, "malloc(0) twice: two blocks");
    memset(s1, 6, 4095); memset(s2, 7, 4096);
    free(z2); free(z1); free(s2); free(s1);
    char *s3 = malloc(8192);
    CHECK(((uintptr_t)s3 & 63) == 0, "8192 bytes after the LIFO frees: on a cache line");
    uintptr_t s3_at = (uintptr_t)s3;
    free(s3);
    char *s4 = malloc(8192);
    CHECK((uintptr_t)s4 == s3_at, "a large LIFO pair reuses its block");
    free(s4);
    resize_region_end();

    /* 6. The release across a gap header: Z, A small, B line-aligned (alignment padding with a
     * gap header between A's end and B's header). Free Z (not last: a tag flip), B (LIFO: the
     * bump pointer goes back to B's header, A is now the block below it, with the gap in
     * between), then A: its link names Z, freed already, so the release goes on down to Z. For
     * each size of A (16 to 64) at least one layout has the gap. */
    int gaps = 0;
    for (size_t asz = 16; asz <= 64; asz += 16) {
        resize_region_begin();
        char *zz = malloc(32), *aa = malloc(asz), *bb = malloc(8192);
        memset(zz, 8, 32); memset(aa, 9, asz); memset(bb, 10, 8192);
        uintptr_t a_end = ((uintptr_t)aa + asz + 15) & ~(uintptr_t)15, z_at = (uintptr_t)zz;
        int gap = (uintptr_t)bb - 16 != a_end;
        gaps += gap;
        free(zz);
        free(bb);
        free(aa);
        char *n = malloc(16);
        CHECK((uintptr_t)n == z_at, "A of %zu bytes%s: the release goes down to the first block",
              asz, gap ? " (gap before B)" : "");
        free(n);
        resize_region_end();
    }
    CHECK(gaps > 0, "a gap header was in the way %d times", gaps);

    /* 7. Many blocks of both paths freed in a shuffled order, region after region: the frees
     * find every block (a wrong tag or header aborts), no block overlaps another (contents
     * intact), and most regions get their memory back at their last free, whichever block that
     * is: the free that leaves no live block in the uncounted range takes the bump pointer back
     * to its start, so a new block lands at the first one, or a little above it where the first
     * few blocks were counted. (A region whose run the slow path had to extend over memory not
     * yet resident has every block before that counted, outside the range: those come back at
     * the region end; 6 of these 50 have more than two pages of them.) */
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    int intact = 1, came_back = 0;
    for (int r = 0; r < 50; r++) {
        char *blk[64];
        int order[64];
        resize_region_begin();
        for (int i = 0; i < 64; i++) {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            size_t n = (rng & 1) ? 16 + rng % 497 : 4096 + rng % 20000;
            blk[i] = malloc(n);
            memset(blk[i], i, n < 64 ? n : 64);
            order[i] = i;
        }
        uintptr_t blk0 = (uintptr_t)blk[0];
        for (int i = 63; i > 0; i--) {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            int j = (int)(rng % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j]; order[j] = t;
        }
        for (int i = 0; i < 64; i++) {
            if (blk[order[i]][0] != (char)order[i]) intact = 0;
            free(blk[order[i]]);
        }
        char *n = malloc(16);
        came_back += (uintptr_t)n < blk0 + 8192;
        free(n);
        resize_region_end();
    }
    CHECK(intact, "shuffled frees: every block kept its contents");
    CHECK(came_back >= 42, "shuffled frees: the memory came back before the end in %d of 50",
          came_back);

    /* 8. A thread that never had an arena frees this thread's blocks, the last one first: its
     * free finds no arena of its own (NO_ARENA) and takes the remote path. */
    resize_region_begin();
    remote_blocks[0] = malloc(300);
    remote_blocks[1] = malloc(5000);
    memset(remote_blocks[0], 11, 300);
    memset(remote_blocks[1], 12, 5000);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_remote_blocks, NULL) == 0 && pthread_join(t, NULL) == 0,
          "another thread freed the region's last two blocks");
    char *after = malloc(64);
    memset(after, 13, 64);
    free(after);
    CHECK(resize_region_end() == 0, "the region ends after the remote frees");

    /* 9. Random work: blocks of every path (0 bytes, small, large) freed LIFO, FIFO or at
     * random, some reallocated, some kept across the end of their region (escapes) and freed in
     * a later one; every block's bytes are checked before it goes. */
    enum { LIVE = 96 };
    struct { unsigned char *p; size_t n; unsigned char v; } live[LIVE];
    int nlive = 0, depth = 0, corrupt = 0;
    unsigned char stamp = 0;
    for (int step = 0; step < 100000; step++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        unsigned what = (unsigned)(rng % 100);
        if (depth == 0 && what < 5) { resize_region_begin(); depth = 1; continue; }
        if (depth == 1 && what < 3) { resize_region_end(); depth = 0; continue; }
        if (nlive < LIVE && (what < 55 || nlive == 0)) {
            uint64_t k = rng >> 40;
            size_t n = k % 7 == 0 ? 0 : k % 3 == 0 ? 4096 + k % 70000 : 1 + k % 600;
            unsigned char *b = malloc(n);
            if (!b && n) { corrupt++; continue; }
            live[nlive].p = b; live[nlive].n = n; live[nlive].v = ++stamp;
            if (n) memset(b, stamp, n);
            nlive++;
            continue;
        }
        if (nlive == 0) continue;
        /* LIFO half the time, else any block */
        int i = what < 80 ? nlive - 1 : (int)((rng >> 20) % (uint64_t)nlive);
        for (size_t j = 0; j < live[i].n; j += 61) if (live[i].p[j] != live[i].v) corrupt++;
        if (live[i].n && live[i].p[live[i].n - 1] != live[i].v) corrupt++;
        if (what >= 95) { /* grow or shrink it in place or moved */
            size_t n = 1 + (rng >> 30) % 9000, keep = n < live[i].n ? n : live[i].n;
            unsigned char *b = realloc(live[i].p, n);
            for (size_t j = 0; j < keep; j += 61) if (b[j] != live[i].v) corrupt++;
            memset(b, live[i].v, n);
            live[i].p = b; live[i].n = n;
            continue;
        }
        free(live[i].p);
        live[i] = live[--nlive];
    }
    while (nlive > 0) { nlive--; free(live[nlive].p); }
    if (depth) resize_region_end();
    CHECK(corrupt == 0, "random work: every block kept its bytes (%d bad)", corrupt);

    /* 10. Blocks a region left live, freed LIFO after its end: on a thread of its own, whose
     * arena holds nothing else live (this one's keeps the blocks leaked above). */
    pthread_t carrier;
    CHECK(pthread_create(&carrier, NULL, free_carried_blocks, NULL) == 0
              && pthread_join(carrier, NULL) == 0,
          "the thread that frees carried blocks ran");

    /* 11. The range's last live block, above blocks freed already or alignment padding. */
    pthread_t lifo_last;
    CHECK(pthread_create(&lifo_last, NULL, free_last_above_freed, NULL) == 0
              && pthread_join(lifo_last, NULL) == 0,
          "the thread that frees the last block above freed ones ran");

    if (failures) { printf("%d failures\n", failures); return 1; }
    printf("all ok\n");
    return 0;
}
