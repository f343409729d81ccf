/*
 * threads.c: short-lived threads that each keep one small object.
 *
 * 100 threads (x scale), two at a time. Each thread is one region under resizealloc's markers:
 * it allocates and frees 10 MB of temporaries (16 B-16 KiB log-uniform, at most 8 live at once),
 * and halfway through allocates one 64-byte "session" object that it pushes onto a global list
 * and never frees. The main thread checks and frees the list at the end.
 */
#include "membench.h"

#include <pthread.h>

#define TEMP_BYTES (10L << 20)
#define WINDOW 8

struct session {
    struct session *next;
    uint64_t key;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct session *sessions;

static void *worker(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg;
    mb_rng r = {id * 1000003};
    void *ring[WINDOW] = {0};
    uint64_t ring_key[WINDOW] = {0};
    long made = 0, k = 0;
    int kept = 0;
    mb_region_begin();
    while (made < TEMP_BYTES) {
        int w = (int)(k % WINDOW);
        if (ring[w]) mb_check_free(ring[w], ring_key[w]);
        size_t n = mb_log_uniform(&r, 16, 16384);
        ring_key[w] = (id << 32) | (uint64_t)k;
        ring[w] = mb_block(n, ring_key[w]);
        made += (long)n;
        k++;
        if (!kept && made >= TEMP_BYTES / 2) {
            struct session *s = mb_xmalloc(64);
            mb_fill(s, 64, id); /* words 0-1 then hold next and key; 2-7 keep the pattern */
            s->key = id;
            pthread_mutex_lock(&lock);
            s->next = sessions;
            sessions = s;
            pthread_mutex_unlock(&lock);
            kept = 1;
        }
    }
    for (int w = 0; w < WINDOW; w++)
        if (ring[w]) mb_check_free(ring[w], ring_key[w]);
    mb_region_end();
    return NULL;
}

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    long n = mb_scaled(100, scale, 4);
    double t0 = mb_now();
    for (long t = 0; t < n; t += 2) {
        pthread_t th[2];
        int m = t + 1 < n ? 2 : 1;
        for (int j = 0; j < m; j++)
            if (pthread_create(&th[j], NULL, worker, (void *)(uintptr_t)(t + j + 1))) return 2;
        for (int j = 0; j < m; j++) pthread_join(th[j], NULL);
    }
    long count = 0;
    uint64_t key_sum = 0;
    while (sessions) {
        struct session *s = sessions;
        sessions = s->next;
        /* the pattern of the session's key, from word 2 on (words 0-1 hold next and key) */
        uint64_t h = mb_mix(s->key), *w = (uint64_t *)s;
        for (int i = 2; i < 8; i++)
            if (w[i] != h + (uint64_t)i * MB_STEP) mb_corrupt("session", s->key, s, (size_t)i * 8);
        key_sum += s->key;
        count++;
        free(s);
    }
    printf("result threads %ld sessions %ld key_sum %llu\n", n, count, (unsigned long long)key_sum);
    if (count != n) return 3;
    mb_finish(mb_now() - t0);
    return 0;
}
