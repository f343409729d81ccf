/*
 * serial_threads.c: short-lived threads one after another.
 *
 * 100 threads (x scale, at least 10), each started after the one before has exited. Each is
 * one region under resizealloc's markers: it allocates and frees 10 MB of temporaries
 * (16 B-1 MiB log-uniform, at most 16 live at once) and keeps one 64-byte object, which it
 * pushes onto a global list. The main thread checks and frees the list at the end.
 */
#include "membench.h"

#include <pthread.h>

#define TEMP_BYTES (10L << 20)
#define WINDOW 16

struct kept {
    struct kept *next;
    uint64_t key;
    char pad[48];
};

static struct kept *list; /* written by one thread at a time: the threads run one by one */

static void *worker(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg;
    mb_rng r = {id * 7919 + 1};
    void *ring[WINDOW] = {0};
    uint64_t ring_key[WINDOW] = {0};
    long made = 0, k = 0;
    mb_region_begin();
    while (made < TEMP_BYTES) {
        int w = (int)(k % WINDOW);
        if (ring[w]) mb_check_free(ring[w], ring_key[w]);
        size_t n = mb_log_uniform(&r, 16, 1 << 20);
        ring_key[w] = (id << 32) | (uint64_t)k;
        ring[w] = mb_block(n, ring_key[w]);
        made += (long)n;
        k++;
    }
    for (int w = 0; w < WINDOW; w++)
        if (ring[w]) mb_check_free(ring[w], ring_key[w]);
    mb_region_end();
    struct kept *s = mb_xmalloc(sizeof *s);
    s->key = id;
    memset(s->pad, (int)(id & 0x7f), sizeof s->pad);
    s->next = list;
    list = s;
    return NULL;
}

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    long n = mb_scaled(100, scale, 10);
    double t0 = mb_now();
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, (void *)(uintptr_t)(i + 1)) != 0) {
            fprintf(stderr, "membench: pthread_create failed\n");
            return 2;
        }
        pthread_join(t, NULL);
    }
    long count = 0;
    uint64_t keys = 0;
    while (list) {
        struct kept *s = list;
        list = s->next;
        for (size_t i = 0; i < sizeof s->pad; i++)
            if (s->pad[i] != (char)(s->key & 0x7f)) mb_corrupt("kept object", s->key, s, i);
        keys += s->key;
        count++;
        free(s);
    }
    double t1 = mb_now();
    printf("result kept %ld objects, keys %llu\n", count, (unsigned long long)keys);
    mb_metric("threads_per_s", (double)n / (t1 - t0));
    mb_finish(t1 - t0);
    return 0;
}
