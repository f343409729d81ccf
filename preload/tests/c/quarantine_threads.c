/* quarantine_threads.c: four threads allocate, fill, check and free blocks of 16 B to 64 KiB as
 * fast as they can, so that in the heap-debug build their frees meet in a full quarantine.
 * Every block must keep its bytes until its free and every free must find its block intact.
 * Prints "all ok". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "pattern.h"

#define THREADS 4
#define LIVE 64
#define ROUNDS 40000

static int failed;

static void *worker(void *arg) {
    uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    unsigned char *blocks[LIVE] = {0};
    size_t sizes[LIVE] = {0};
    uint64_t keys[LIVE] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int i = (int)(next_rand(&seed) % LIVE);
        if (blocks[i]) {
            if (!intact(blocks[i], sizes[i], keys[i])) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
            free(blocks[i]);
        }
        uint64_t k = next_rand(&seed);
        sizes[i] = (k % 8 == 0) ? 16 + k % (64 << 10) : 16 + k % 512;
        keys[i] = k;
        blocks[i] = malloc(sizes[i]);
        if (!blocks[i]) { __atomic_store_n(&failed, 1, __ATOMIC_RELAXED); return NULL; }
        fill(blocks[i], sizes[i], k);
    }
    for (int i = 0; i < LIVE; i++) {
        if (blocks[i] && !intact(blocks[i], sizes[i], keys[i])) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
        free(blocks[i]);
    }
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    if (failed) { puts("a block lost its bytes"); return 1; }
    puts("all ok");
    return 0;
}
