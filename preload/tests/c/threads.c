/* Two threads in regions exchanging blocks (cross-thread frees), and a thread that exits while
 * its arena blocks are still live. Exits 1 on corruption. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

#define SLOTS 1024
static void *_Atomic mailbox[SLOTS];
static long rounds = 200000;

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uint64_t x = 0x9E3779B97F4A7C15ull * (id + 1);
    long sent = 0, received = 0;
    for (long r = 0; r < rounds; r++) {
        resize_region_begin();
        for (int k = 0; k < 8; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            size_t n = 8 + x % 1000;
            unsigned char *p = malloc(n);
            memset(p, (unsigned char)n, n);
            if (k == 0) {
                /* hand it to the other thread through a slot; take what is there */
                size_t slot = x % SLOTS;
                unsigned char *old = __atomic_exchange_n(&mailbox[slot], (void *)p, __ATOMIC_ACQ_REL);
                sent++;
                if (old) {
                    size_t m = old[0] == 0 ? 0 : 0; (void)m;
                    free(old);
                    received++;
                }
            } else {
                free(p);
            }
        }
        if (resize_region_end() != 0) { puts("FAIL region end"); exit(1); }
    }
    printf("thread %lu sent %ld freed %ld\n", (unsigned long)id, sent, received);
    return NULL;
}

static void *leaver(void *arg) {
    (void)arg;
    resize_region_begin();
    char **blocks = malloc(64 * sizeof *blocks);
    for (int i = 0; i < 64; i++) { blocks[i] = malloc(1000); memset(blocks[i], i, 1000); }
    resize_region_end();
    return blocks; /* the thread exits with its arena blocks live */
}

int main(void) {
    pthread_t a, b, c;
    pthread_create(&a, NULL, worker, (void *)0);
    pthread_create(&b, NULL, worker, (void *)1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    for (int i = 0; i < SLOTS; i++) free(mailbox[i]);

    pthread_create(&c, NULL, leaver, NULL);
    void *ret;
    pthread_join(c, &ret);
    char **blocks = ret;
    struct resize_stats s;
    resize_stats_get(&s, sizeof s);
    if (s.process.arenas_orphaned < 1) { puts("FAIL exited thread's arena not orphaned"); return 1; }
    for (int r = 0; r < 1000; r++) { /* other threads' regions must not reuse that memory */
        resize_region_begin();
        char *junk = malloc(5000); memset(junk, 0xEE, 5000); free(junk);
        resize_region_end();
    }
    for (int i = 0; i < 64; i++) {
        for (int j = 0; j < 1000; j++) if (blocks[i][j] != (char)i) { puts("FAIL block of an exited thread changed"); return 1; }
        free(blocks[i]);
    }
    free(blocks);
    resize_stats_get(&s, sizeof s);
    if (s.process.arenas_orphaned != 0) { puts("FAIL orphaned arena not released after its last free"); return 1; }
    puts("all ok");
    return 0;
}
