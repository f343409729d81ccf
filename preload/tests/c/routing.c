/* Process mode: the lifetime predictor changes where one allocation site's blocks go while the
 * program runs. Blocks from both sides (arena and next allocator) must survive everything:
 * frees on other threads, realloc, the exit of the thread that allocated them. Site A's blocks
 * are over 1 KiB: smaller ones go to the small-block heap whatever their site, and its short
 * temporaries are small, so blocks of all three sides meet here.
 *
 * Phase 1: site A keeps its blocks alive for a long time (a growing table): the predictor learns
 * it long and sends it to the next allocator. Phase 2: the same site makes short-lived blocks:
 * probes teach it short again and it comes back to the arena. Every block carries a pattern
 * derived from its index, checked before every free and after every realloc. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

#define N 60000
static unsigned char *blocks[N];
static size_t sizes[N];

static void fill(unsigned char *p, size_t n, size_t i) { for (size_t k = 0; k < n; k++) p[k] = (unsigned char)(i * 31 + k); }
static int ok(const unsigned char *p, size_t n, size_t i) { for (size_t k = 0; k < n; k++) if (p[k] != (unsigned char)(i * 31 + k)) return 0; return 1; }
#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)

__attribute__((noinline)) static unsigned char *site_a(size_t n) { return malloc(n); }

static void *producer(void *arg) {
    (void)arg;
    /* phase 1: long-lived blocks from site A, between short temporaries */
    for (size_t i = 0; i < N / 2; i++) {
        void *t = malloc(64 + i % 512);
        sizes[i] = 1040 + i % 300;
        blocks[i] = site_a(sizes[i]);
        fill(blocks[i], sizes[i], i);
        free(t);
    }
    /* phase 2: site A's blocks now die young; keep every 16th */
    for (size_t i = N / 2; i < N; i++) {
        sizes[i] = 1040 + i % 300;
        unsigned char *p = site_a(sizes[i]);
        fill(p, sizes[i], i);
        if (i % 16) {
            CHECK(ok(p, sizes[i], i), "short block intact");
            free(p);
            p = NULL;
        }
        blocks[i] = p;
    }
    return NULL; /* exits with its blocks, from both sides, live */
}

static void *consumer(void *arg) {
    size_t parity = (size_t)arg;
    for (size_t i = parity; i < N; i += 2) {
        if (!blocks[i]) continue;
        CHECK(ok(blocks[i], sizes[i], i), "block intact after its thread exited");
        if (i % 3 == 0) { /* realloc from another thread: grow, check the prefix, refill */
            unsigned char *q = realloc(blocks[i], sizes[i] * 3);
            CHECK(q && ok(q, sizes[i], i), "realloc kept the contents");
            sizes[i] *= 3;
            fill(q, sizes[i], i);
            blocks[i] = q;
        } else if (i % 3 == 1) {
            free(blocks[i]);
            blocks[i] = NULL;
        }
    }
    return NULL;
}

int main(void) {
    pthread_t p, c[2];
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(p, NULL);
    struct resize_stats s;
    resize_stats_get(&s, sizeof s);
    CHECK(s.memory.sites_learned_long >= 1, "phase 1 taught a site long");
    for (long k = 0; k < 2; k++) pthread_create(&c[k], NULL, consumer, (void *)k);
    for (int k = 0; k < 2; k++) pthread_join(c[k], NULL);
    for (size_t i = 0; i < N; i++) {
        if (!blocks[i]) continue;
        CHECK(ok(blocks[i], sizes[i], i), "block intact at the end");
        free(blocks[i]);
    }
    resize_stats_get(&s, sizeof s);
    printf("all ok: long %llu, short again %llu, routed away %llu bytes\n",
           (unsigned long long)s.memory.sites_learned_long, (unsigned long long)s.memory.sites_learned_short,
           (unsigned long long)s.memory.bytes_routed_away);
    return 0;
}
