/* The region advisor's test program: temporaries inside two functions (parse_request, the
 * larger, and score_batch), long-lived data built in a third (remember), all called from a
 * loop. Arguments: "region" marks each call of parse_request as a region, through the C API
 * found with dlsym (the library is preloaded), "fork" runs the loop again in a forked child
 * (which exits normally), anything else neither; the rounds (200000);
 * the threads that run the loop (1). Prints a checksum that must not change under profiling,
 * and the time of the loops on stderr as "loop_ns N". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

static __thread uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

struct kept {
    struct kept *next;
    char payload[40];
};
static struct kept *kept_list;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

/* Long-lived: one node per call, freed at the end of main. */
__attribute__((noinline)) static void remember(uint64_t v) {
    struct kept *k = malloc(sizeof *k);
    memset(k->payload, (int)(v & 0x7f), sizeof k->payload);
    pthread_mutex_lock(&kept_lock);
    k->next = kept_list;
    kept_list = k;
    pthread_mutex_unlock(&kept_lock);
}

/* Temporaries: 64 blocks of 32..1056 bytes, touched, freed in allocation order. */
__attribute__((noinline)) static uint64_t parse_request(void) {
    char *tmp[64];
    uint64_t sum = 0;
    for (int i = 0; i < 64; i++) {
        size_t n = 32 + next_rand() % 1024;
        tmp[i] = malloc(n);
        tmp[i][0] = (char)i;
        tmp[i][n - 1] = (char)n;
        sum += (unsigned char)tmp[i][n - 1];
    }
    for (int i = 0; i < 64; i++) {
        sum += (unsigned char)tmp[i][0];
        free(tmp[i]);
    }
    return sum;
}

/* Fewer, smaller temporaries, freed in reverse order. */
__attribute__((noinline)) static uint64_t score_batch(void) {
    char *tmp[16];
    uint64_t sum = 0;
    for (int i = 0; i < 16; i++) {
        size_t n = 16 + next_rand() % 240;
        tmp[i] = malloc(n);
        tmp[i][0] = (char)(n & 0x7f);
        sum += (unsigned char)tmp[i][0];
    }
    for (int i = 15; i >= 0; i--)
        free(tmp[i]);
    return sum;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int use_region;
static long rounds = 200000;
static void (*region_begin)(void);
static int (*region_end)(void);

static void *run(void *arg) {
    uint64_t sum = 0;
    (void)arg;
    for (long r = 0; r < rounds; r++) {
        if (use_region)
            region_begin();
        sum += parse_request();
        if (use_region)
            region_end();
        sum += score_batch();
        if (r % 64 == 0)
            remember(sum);
    }
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv) {
    use_region = argc > 1 && strcmp(argv[1], "region") == 0;
    if (argc > 2)
        rounds = atol(argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    if (threads < 1 || threads > 64)
        threads = 1;
    if (use_region) {
        region_begin = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
        region_end = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
        if (!region_begin || !region_end) {
            fprintf(stderr, "advisor: resize_region_begin not found (preload the library)\n");
            return 2;
        }
    }
    uint64_t sum = 0;
    uint64_t t0 = now_ns();
    if (threads == 1) {
        sum = (uint64_t)(uintptr_t)run(0);
    } else {
        pthread_t t[64];
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], 0, run, 0);
        for (int i = 0; i < threads; i++) {
            void *r;
            pthread_join(t[i], &r);
            sum += (uint64_t)(uintptr_t)r;
        }
    }
    uint64_t t1 = now_ns();
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            run(0);
            exit(0);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "advisor: the forked child failed\n");
            return 1;
        }
    }
    long kept = 0;
    while (kept_list) {
        struct kept *k = kept_list;
        kept_list = k->next;
        free(k);
        kept++;
    }
    printf("checksum %llu kept %ld\n", (unsigned long long)sum, kept);
    fprintf(stderr, "loop_ns %llu\n", (unsigned long long)(t1 - t0));
    if (getenv("ADVISOR_ANON")) {
        /* Anonymous memory now (the profiler's tables included; the library's own file pages,
         * which its unwinding reads, are not). */
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "RssAnon:", 8) == 0)
                fprintf(stderr, "anon_kib %ld\n", atol(line + 8));
        if (f)
            fclose(f);
    }
    return 0;
}
