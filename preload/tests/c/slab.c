/* The small-block heap (src/slab/) under stress. Run with RESIZEALLOC_REGION=process and
 * RESIZEALLOC_MAX_SIZE=1, so that every request of 2 B..1 KiB is routed away from the arena and
 * served by the small-block heap (the stats prove it).
 *
 * 1. One thread: random sizes, random frees, realloc within and across classes, calloc of
 *    reused (dirty) blocks; every block carries a pattern checked before it is freed.
 * 2. Producers hand blocks to consumers on other threads, which check and free them: remote
 *    frees, full pages detached and adopted.
 * 3. Threads allocate blocks and exit; the main thread checks and frees them afterwards (pages
 *    abandoned at exit, settled by remote frees), while new threads allocate (adoption).
 * 4. 256 MiB of 64-byte blocks freed in bulk: the pages go back to the kernel (RSS drops). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <malloc.h>
#include "pattern.h"
#include "resizealloc.h"

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)

static uint64_t rng_state = 88172645463325252ULL;

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static struct resize_small_stats small_stats(void) {
    struct resize_stats s;
    CHECK(resize_stats_get(&s, sizeof s) == (int)sizeof s, "stats size");
    return s.small;
}

/* ---------------------------------------------------------------- 1. one thread */
#define N1 20000
static unsigned char *b1[N1];
static size_t n1[N1];

static void single_thread(void) {
    uint64_t r = 7;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N1; i++) {
            uint64_t x = next_rand(&r);
            if (b1[i] && x % 3 == 0) {
                CHECK(intact(b1[i], n1[i], (uint64_t)i), "pattern before free");
                free(b1[i]);
                b1[i] = NULL;
            } else if (b1[i] && x % 3 == 1) {
                size_t n = 2 + next_rand(&r) % 1100; /* some leave the small heap */
                CHECK(intact(b1[i], n1[i], (uint64_t)i), "pattern before realloc");
                unsigned char *q = realloc(b1[i], n);
                CHECK(q, "realloc");
                CHECK(intact(q, n < n1[i] ? n : n1[i], (uint64_t)i), "realloc keeps the prefix");
                CHECK(malloc_usable_size(q) >= n, "usable size after realloc");
                fill(q, n, (uint64_t)i);
                b1[i] = q;
                n1[i] = n;
            } else if (!b1[i]) {
                size_t n = 2 + next_rand(&r) % 1023;
                if (x % 5 == 0) {
                    b1[i] = calloc(1, n);
                    CHECK(b1[i], "calloc");
                    for (size_t k = 0; k < n; k++) CHECK(b1[i][k] == 0, "calloc of a reused block reads zero");
                } else {
                    b1[i] = malloc(n);
                    CHECK(b1[i], "malloc");
                }
                CHECK(((uintptr_t)b1[i] & 15) == 0, "16-byte alignment");
                CHECK(malloc_usable_size(b1[i]) >= n, "usable size");
                fill(b1[i], n, (uint64_t)i);
                n1[i] = n;
            }
        }
    }
    struct resize_small_stats ss = small_stats();
    CHECK(ss.pages_in_use > 0, "the small-block heap served the blocks");
    struct mallinfo2 mi = mallinfo2();
    size_t live = 0;
    for (int i = 0; i < N1; i++) live += b1[i] ? n1[i] : 0;
    CHECK(mi.uordblks >= live, "mallinfo2's uordblks counts the small-block heap's live blocks");
    for (int i = 0; i < N1; i++) {
        if (b1[i]) {
            CHECK(intact(b1[i], n1[i], (uint64_t)i), "pattern at the end");
            free(b1[i]);
            b1[i] = NULL;
        }
    }
}

/* ---------------------------------------------------------------- 2. producers and consumers */
#define QCAP 4096
#define PER_PRODUCER 200000
struct queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void *items[QCAP];
    size_t sizes[QCAP];
    uint64_t keys[QCAP];
    int head, count, done;
};
static struct queue q2 = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, {0}, {0}, 0, 0, 0};

static void *producer(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg, r = id * 977 + 1;
    for (long k = 0; k < PER_PRODUCER; k++) {
        size_t n = 2 + next_rand(&r) % 511;
        uint64_t key = (id << 40) | (uint64_t)k;
        unsigned char *p = malloc(n);
        CHECK(p, "producer malloc");
        fill(p, n, key);
        /* every 4th block is freed here, between blocks that leave: mixed local/remote frees */
        if (k % 4 == 0) { free(p); continue; }
        pthread_mutex_lock(&q2.lock);
        while (q2.count == QCAP) pthread_cond_wait(&q2.cond, &q2.lock);
        int at = (q2.head + q2.count) % QCAP;
        q2.items[at] = p; q2.sizes[at] = n; q2.keys[at] = key;
        q2.count++;
        pthread_cond_broadcast(&q2.cond);
        pthread_mutex_unlock(&q2.lock);
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&q2.lock);
        while (q2.count == 0 && !q2.done) pthread_cond_wait(&q2.cond, &q2.lock);
        if (q2.count == 0 && q2.done) { pthread_mutex_unlock(&q2.lock); return NULL; }
        void *p = q2.items[q2.head]; size_t n = q2.sizes[q2.head]; uint64_t key = q2.keys[q2.head];
        q2.head = (q2.head + 1) % QCAP;
        q2.count--;
        pthread_cond_broadcast(&q2.cond);
        pthread_mutex_unlock(&q2.lock);
        CHECK(intact(p, n, key), "block intact on the consumer thread");
        free(p);
    }
}

static void producers_and_consumers(void) {
    pthread_t p[2], c[2];
    for (int i = 0; i < 2; i++) CHECK(!pthread_create(&p[i], NULL, producer, (void *)(uintptr_t)(i + 1)), "create producer");
    for (int i = 0; i < 2; i++) CHECK(!pthread_create(&c[i], NULL, consumer, NULL), "create consumer");
    for (int i = 0; i < 2; i++) pthread_join(p[i], NULL);
    pthread_mutex_lock(&q2.lock);
    q2.done = 1;
    pthread_cond_broadcast(&q2.cond);
    pthread_mutex_unlock(&q2.lock);
    for (int i = 0; i < 2; i++) pthread_join(c[i], NULL);
}

/* ---------------------------------------------------------------- 3. blocks outliving threads */
#define PER_EXITER 5000
#define EXITERS 16
static unsigned char *kept[EXITERS][PER_EXITER];

static void *exiter(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg, r = id + 5;
    for (int k = 0; k < PER_EXITER; k++) {
        size_t n = 16 + next_rand(&r) % 200;
        kept[id][k] = malloc(n);
        CHECK(kept[id][k], "exiter malloc");
        fill(kept[id][k], 16, (id << 20) | (uint64_t)k);
        /* and temporaries that die here */
        free(malloc(n));
    }
    return NULL;
}

static void blocks_outlive_their_threads(void) {
    for (int wave = 0; wave < 2; wave++) {
        pthread_t t[EXITERS / 2];
        for (int i = 0; i < EXITERS / 2; i++) {
            int id = wave * (EXITERS / 2) + i;
            CHECK(!pthread_create(&t[i], NULL, exiter, (void *)(uintptr_t)id), "create exiter");
        }
        for (int i = 0; i < EXITERS / 2; i++) pthread_join(t[i], NULL);
        /* free every other block of the first wave while the second allocates (after join:
           the first wave's pages are abandoned; the second wave adopts them) */
        if (wave == 0)
            for (int id = 0; id < EXITERS / 2; id++)
                for (int k = 0; k < PER_EXITER; k += 2) {
                    CHECK(intact(kept[id][k], 16, ((uint64_t)id << 20) | (uint64_t)k), "abandoned block intact");
                    free(kept[id][k]);
                    kept[id][k] = NULL;
                }
    }
    for (int id = 0; id < EXITERS; id++)
        for (int k = 0; k < PER_EXITER; k++)
            if (kept[id][k]) {
                CHECK(intact(kept[id][k], 16, ((uint64_t)id << 20) | (uint64_t)k), "block of an exited thread intact");
                free(kept[id][k]);
            }
}

/* ---------------------------------------------------------------- 4. memory goes back */
#define BULK (256L << 20) /* BULK / 64 blocks of 48 bytes */
static void bulk_free_gives_memory_back(void) {
    long n = BULK / 64;
    long before = rss_kib();
    void **v = malloc((size_t)n * sizeof *v); /* 32 MiB: the next allocator's (mmap) */
    CHECK(v, "index");
    for (long i = 0; i < n; i++) {
        v[i] = malloc(48);
        CHECK(v[i], "bulk malloc");
        memset(v[i], 0x5a, 48);
    }
    long full = rss_kib();
    struct resize_small_stats s1 = small_stats();
    for (long i = 0; i < n; i++) free(v[i]);
    free(v);
    /* Under process mode's defaults the 32 MiB index is the arena's: what frees leave above its
     * bound goes back after RESIZEALLOC_PURGE_DELAY_MS (100 ms), at the next allocations. */
    usleep(300 * 1000);
    for (int i = 0; i < 20000; i++) {
        void *volatile q = malloc(16 + (size_t)i % 500);
        free(q);
    }
    long after = rss_kib();
    struct resize_small_stats s2 = small_stats();
    printf("bulk: rss before %ld KiB, full %ld KiB, after free %ld KiB; pages %lu -> %lu, given back %lu -> %lu\n",
           before, full, after, (unsigned long)s1.pages_in_use, (unsigned long)s2.pages_in_use,
           (unsigned long)s1.pages_given_back, (unsigned long)s2.pages_given_back);
    CHECK(full - before > 200 * 1024, "the blocks were resident");
    CHECK(s1.pages_in_use * 65536 >= (unsigned long)n * 48, "the small-block heap served them");
    CHECK(after - before < 16 * 1024, "freed pages went back to the kernel");
    CHECK(s2.pages_given_back - s1.pages_given_back > (unsigned long)n * 48 / 65536 * 9 / 10, "pages given back counted");
}

int main(void) {
    single_thread();
    printf("single thread ok\n");
    producers_and_consumers();
    printf("producers and consumers ok\n");
    blocks_outlive_their_threads();
    printf("blocks outliving their threads ok\n");
    struct resize_small_stats s = small_stats();
    printf("pages in use %lu, given back %lu, adopted %lu\n", (unsigned long)s.pages_in_use,
           (unsigned long)s.pages_given_back, (unsigned long)s.pages_adopted);
    CHECK(s.pages_adopted > 0, "pages changed hands");
    bulk_free_gives_memory_back();
    (void)rng_state;
    printf("all ok\n");
    return 0;
}
