/* Process mode sends every request of up to 1 KiB to the small-block heap, short-lived or not;
 * the lifetime predictor decides only for larger ones. Run with RESIZEALLOC_REGION=process and
 * no other option.
 *
 * 1. A window of 32 temporaries of 16 B..1 KiB freed in random order (one in eight a calloc, one
 *    in eight grown or shrunk by realloc): none is an arena allocation, the heap has pages, and
 *    every block keeps its pattern; callocs over reused blocks read as zero.
 * 2. The same window of 1,100 B..4 KiB temporaries: the arena serves them (short-lived).
 * 3. realloc across the sides: small -> 3,000 B -> small again, contents kept.
 * 4. Small blocks freed by another thread. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pattern.h"
#include "resizealloc.h"

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)
#define WINDOW 32
#define STEPS 200000


static struct resize_stats stats(void) {
    struct resize_stats s;
    resize_stats_get(&s, sizeof s);
    return s;
}

/* STEPS replacements of a random block of the window by one of lo..hi bytes. */
static void window(size_t lo, size_t hi, uint64_t seed) {
    unsigned char *blk[WINDOW] = {0};
    size_t len[WINDOW] = {0};
    uint64_t key[WINDOW] = {0};
    uint64_t r = seed;
    for (uint64_t step = 1; step <= STEPS; step++) {
        int k = (int)(next_rand(&r) % WINDOW);
        size_t n = lo + next_rand(&r) % (hi - lo + 1);
        int kind = (int)(next_rand(&r) % 8);
        if (blk[k]) CHECK(intact(blk[k], len[k], key[k]), "a temporary kept its pattern");
        if (kind == 1 && blk[k]) {
            unsigned char *q = realloc(blk[k], n);
            CHECK(q, "realloc");
            size_t keep = len[k] < n ? len[k] : n;
            CHECK(intact(q, keep, key[k]), "realloc kept the common prefix");
            blk[k] = q;
        } else {
            free(blk[k]);
            if (kind == 0) {
                blk[k] = calloc(1, n);
                CHECK(blk[k], "calloc");
                for (size_t j = 0; j < n; j++) CHECK(blk[k][j] == 0, "calloc over a reused block reads as zero");
            } else {
                blk[k] = malloc(n);
                CHECK(blk[k], "malloc");
            }
        }
        len[k] = n;
        key[k] = step;
        fill(blk[k], n, step);
    }
    for (int k = 0; k < WINDOW; k++) {
        if (blk[k]) CHECK(intact(blk[k], len[k], key[k]), "a temporary kept its pattern at the end");
        free(blk[k]);
    }
}

#define HANDED 1000
static unsigned char *handed[HANDED];

static void *free_them(void *arg) {
    (void)arg;
    for (int i = 0; i < HANDED; i++) {
        CHECK(intact(handed[i], 16 + (size_t)i % 1009, (uint64_t)i), "a block handed to another thread kept its pattern");
        free(handed[i]);
    }
    return NULL;
}

int main(void) {
    uint64_t before = stats().thread.region_allocs;
    window(16, 1024, 11);
    struct resize_stats s = stats();
    CHECK(s.thread.region_allocs == before, "no small temporary came from the arena");
    CHECK(s.small.pages_in_use >= 1, "the small-block heap served them");

    before = s.thread.region_allocs;
    window(1100, 4096, 13);
    CHECK(stats().thread.region_allocs - before >= STEPS / 2, "the arena served the larger temporaries");

    unsigned char *p = malloc(100);
    CHECK(p, "malloc");
    fill(p, 100, 7);
    p = realloc(p, 3000);
    CHECK(p && intact(p, 100, 7), "small -> 3,000 B kept the contents");
    fill(p, 3000, 8);
    p = realloc(p, 200);
    CHECK(p && intact(p, 200, 8), "3,000 B -> small kept the prefix");
    free(p);

    for (int i = 0; i < HANDED; i++) {
        handed[i] = malloc(16 + (size_t)i % 1009);
        CHECK(handed[i], "malloc");
        fill(handed[i], 16 + (size_t)i % 1009, (uint64_t)i);
    }
    pthread_t t;
    pthread_create(&t, NULL, free_them, NULL);
    pthread_join(t, NULL);

    s = stats();
    printf("all ok: small pages in use %llu, given back %llu, adopted %llu\n",
           (unsigned long long)s.small.pages_in_use, (unsigned long long)s.small.pages_given_back,
           (unsigned long long)s.small.pages_adopted);
    return 0;
}
