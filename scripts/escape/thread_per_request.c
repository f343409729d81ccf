/*
 * thread_per_request.c: one short-lived thread per request, each leaving one object behind.
 *
 *   thread_per_request [THREADS=100] [BLOCKS=20000]
 *
 * THREADS threads run one after another (each is joined before the next starts). Each runs
 * one region (resize_region_begin/end, looked up with dlsym so the same binary runs under
 * every allocator; elsewhere they are no-ops): it allocates BLOCKS blocks of 500 bytes, all
 * live at once, writes 64 bytes into each, then allocates one 64-byte session object that
 * escapes the region (stored in a global array), reads back and frees the 500-byte blocks and
 * exits. The main thread checks and frees the sessions at the end, after their threads and
 * regions are gone.
 *
 * Output: "checksum <hex>" (identical under every allocator: it hashes the contents read back,
 * never addresses), "time_s <seconds>" (first thread created to last session freed) and
 * "maxrss_kib <ru_maxrss>".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BLOCK 500
#define FILL 64
#define SESSION 64

static void (*region_begin)(void);
static int (*region_end)(void);
static long nblocks = 20000;
static unsigned char **sessions;
static uint64_t *sums; /* one per thread: written by that thread only */

static uint64_t mix(uint64_t x) { /* splitmix64 finaliser */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void fill(unsigned char *p, uint64_t key, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = mix(key + i);
        memcpy(p + i, &w, 8);
    }
}

static void *worker(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg;
    unsigned char **blocks = malloc((size_t)nblocks * sizeof *blocks); /* outside the region */
    if (!blocks) abort();
    if (region_begin) region_begin();
    for (long i = 0; i < nblocks; i++) {
        blocks[i] = malloc(BLOCK);
        if (!blocks[i]) abort();
        fill(blocks[i], (id << 32) | (uint64_t)i, FILL);
    }
    unsigned char *s = malloc(SESSION); /* the session: escapes the region and the thread */
    if (!s) abort();
    fill(s, ~id, SESSION);
    sessions[id] = s;
    uint64_t h = id;
    for (long i = 0; i < nblocks; i++) {
        uint64_t w[FILL / 8];
        memcpy(w, blocks[i], FILL);
        for (int j = 0; j < FILL / 8; j++) h = mix(h ^ w[j]);
        free(blocks[i]);
    }
    if (region_end && region_end() != 0) {
        fprintf(stderr, "resize_region_end failed\n");
        exit(4);
    }
    free(blocks);
    sums[id] = h;
    return NULL;
}

int main(int argc, char **argv) {
    long threads = argc > 1 ? atol(argv[1]) : 100;
    if (argc > 2) nblocks = atol(argv[2]);
    if (threads < 1 || nblocks < 1) { fprintf(stderr, "usage: %s [THREADS] [BLOCKS]\n", argv[0]); return 1; }
    *(void **)&region_begin = dlsym(RTLD_DEFAULT, "resize_region_begin");
    *(void **)&region_end = dlsym(RTLD_DEFAULT, "resize_region_end");
    if (!region_begin || !region_end) region_begin = NULL, region_end = NULL;
    sessions = calloc((size_t)threads, sizeof *sessions);
    sums = calloc((size_t)threads, sizeof *sums);
    if (!sessions || !sums) abort();

    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long t = 0; t < threads; t++) {
        pthread_t th;
        if (pthread_create(&th, NULL, worker, (void *)(uintptr_t)t) != 0) { perror("pthread_create"); return 2; }
        pthread_join(th, NULL);
    }
    uint64_t h = 0;
    for (long t = 0; t < threads; t++) {
        unsigned char want[SESSION];
        fill(want, ~(uint64_t)t, SESSION);
        if (memcmp(sessions[t], want, SESSION) != 0) {
            fprintf(stderr, "session %ld corrupted\n", t);
            return 3;
        }
        h = mix(h ^ sums[t] ^ sessions[t][t % SESSION]);
        free(sessions[t]);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("checksum %016llx\n", (unsigned long long)h);
    printf("time_s %.6f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
    printf("maxrss_kib %ld\n", ru.ru_maxrss);
    return 0;
}
