/* Arenas of exited threads handed on (src/reservation.rs), under LD_PRELOAD in process mode:
 * waves of short threads that each make temporaries and keep some blocks, which a long-lived
 * consumer thread checks and frees while the next wave starts (and adopts or reuses the
 * exited threads' arenas). Every block carries a pattern checked before it is freed; the
 * consumer also keeps some blocks to the end. Exits 1 on corruption. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)

#define WAVES 40
#define PER_WAVE 4
#define TEMPS 2400
#define KEPT (TEMPS / 60) /* blocks a producer keeps */
#define QUEUE (WAVES * PER_WAVE * KEPT)

struct block { uint64_t key; size_t size; unsigned char *p; };

static struct block queue[QUEUE];
static long queued, consumed;
static int done;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;

static uint64_t mix(uint64_t x) { x ^= x >> 31; x *= 0x9E3779B97F4A7C15ull; return x ^ (x >> 29); }
static void fill(unsigned char *p, size_t n, uint64_t key) { for (size_t k = 0; k < n; k++) p[k] = (unsigned char)(mix(key) + k); }
static int intact(const unsigned char *p, size_t n, uint64_t key) { for (size_t k = 0; k < n; k++) if (p[k] != (unsigned char)(mix(key) + k)) return 0; return 1; }

static void *producer(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg, x = mix(id + 1);
    unsigned char *ring[8] = {0};
    size_t ring_size[8] = {0};
    resize_region_begin(); /* markers mode: the kept blocks escape the region */
    for (int i = 0; i < TEMPS; i++) { /* temporaries, FIFO, 8 live */
        int w = i % 8;
        if (ring[w]) { CHECK(intact(ring[w], ring_size[w], id * 100000 + (uint64_t)i - 8), "temporary"); free(ring[w]); }
        x = mix(x);
        ring_size[w] = 16 + x % 6000;
        ring[w] = malloc(ring_size[w]);
        CHECK(ring[w], "malloc temporary");
        fill(ring[w], ring_size[w], id * 100000 + (uint64_t)i);
        if (i % 60 == 59) { /* a kept block, handed to the consumer */
            struct block b;
            x = mix(x);
            b.size = 8 + x % 3000;
            b.key = (id << 20) | (uint64_t)i;
            b.p = (x & 1) ? calloc(1, b.size) : malloc(b.size);
            CHECK(b.p, "malloc kept");
            if (x & 1) for (size_t k = 0; k < b.size; k++) CHECK(b.p[k] == 0, "calloc not zero");
            fill(b.p, b.size, b.key);
            pthread_mutex_lock(&lock);
            CHECK(queued < QUEUE, "queue full");
            queue[queued++] = b;
            pthread_cond_signal(&more);
            pthread_mutex_unlock(&lock);
        }
    }
    for (int w = 0; w < 8; w++) if (ring[w]) free(ring[w]);
    resize_region_end();
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    struct block *kept = malloc(QUEUE * sizeof *kept);
    long nkept = 0;
    CHECK(kept, "malloc kept list");
    for (;;) {
        pthread_mutex_lock(&lock);
        while (consumed == queued && !done) pthread_cond_wait(&more, &lock);
        if (consumed == queued && done) { pthread_mutex_unlock(&lock); break; }
        struct block b = queue[consumed++];
        pthread_mutex_unlock(&lock);
        CHECK(intact(b.p, b.size, b.key), "a kept block changed before its free");
        if (b.key % 7 == 0) kept[nkept++] = b; /* some live to the end */
        else free(b.p);
    }
    for (long i = 0; i < nkept; i++) {
        CHECK(intact(kept[i].p, kept[i].size, kept[i].key), "a block kept to the end changed");
        free(kept[i].p);
    }
    free(kept);
    return NULL;
}

int main(void) {
    pthread_t c;
    CHECK(pthread_create(&c, NULL, consumer, NULL) == 0, "consumer");
    for (int w = 0; w < WAVES; w++) {
        pthread_t t[PER_WAVE];
        for (int i = 0; i < PER_WAVE; i++)
            CHECK(pthread_create(&t[i], NULL, producer, (void *)(uintptr_t)(w * PER_WAVE + i + 1)) == 0, "producer");
        for (int i = 0; i < PER_WAVE; i++) pthread_join(t[i], NULL);
    }
    pthread_mutex_lock(&lock);
    done = 1;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&lock);
    pthread_join(c, NULL);
    struct resize_stats s;
    CHECK(resize_stats_get(&s, sizeof s) == (int)sizeof s, "stats");
    printf("all ok: %ld blocks handed over; %llu arenas live, %llu orphaned at the end\n", queued,
           (unsigned long long)s.process.arenas_live, (unsigned long long)s.process.arenas_orphaned);
    CHECK(s.process.arenas_orphaned == 0, "every orphaned arena was adopted or released");
    return 0;
}
