/*
 * bench_alloc.c: region workloads that run unchanged under any malloc (glibc, LD_PRELOAD of
 * mimalloc/jemalloc/tcmalloc/libresizealloc.so). Region markers are looked up at run time with
 * dlsym(RTLD_DEFAULT, ...); where they are absent they are no-ops.
 *
 * Build: gcc -std=c11 -O2 -pthread -o bench_alloc bench_alloc.c -ldl -lm
 * Usage: bench_alloc [--quick] [--scale F] [--floor] [--only W1,W2,...]
 *   --only runs just the named workloads (bumper lifo mixed temp8m copy outside threads).
 * Output: lines "RESULT <name> <value> <unit>" (plus "INFO ..." lines).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../preload/include/resizealloc.h" /* only for struct resize_stats; nothing is linked */

typedef void (*begin_fn)(void);
typedef int (*end_fn)(void);
static begin_fn region_begin_p;
static end_fn region_end_p;
static int region_errors;

static void floor_region(void);
static inline void rbegin(void) { if (region_begin_p) region_begin_p(); floor_region(); }
static inline void rend(void) { if (region_end_p && region_end_p() != 0) region_errors++; }

static volatile uint64_t sink;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* xorshift64, same seed for every run */
typedef struct { uint64_t s; } rng_t;
static inline uint64_t xs(rng_t *r) {
    uint64_t x = r->s;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return r->s = x;
}

/* defined below */
/* --floor: every allocation bumps through a per-thread static buffer and frees are no-ops, so
 * the run measures the work alone (the fastest any allocator could be). */
static int floor_mode;
#define FLOOR_BYTES ((size_t)160 << 20)
static __thread char *floor_buf;
static __thread size_t floor_off;

static __thread char *floor_last;

static void *floor_alloc(size_t n) {
    if (!floor_buf) floor_buf = aligned_alloc(4096, FLOOR_BYTES);
    if (floor_off + n + 16 > FLOOR_BYTES) floor_off = 0;
    char *p = floor_buf + floor_off;
    floor_off = (floor_off + n + 15) & ~(size_t)15;
    return floor_last = p;
}

static inline void xfree(void *p) {
    if (!floor_mode) free(p);
    else if (p == floor_last) floor_off = (size_t)(floor_last - floor_buf); /* LIFO, like a bump arena */
}

static void floor_region(void) {
    if (floor_mode) floor_off = 0;
}

static void *xmalloc(size_t n) {
    if (floor_mode) return floor_alloc(n);
    void *p = malloc(n);
    if (!p) { fprintf(stderr, "malloc(%zu) failed\n", n); exit(2); }
    return p;
}

/* ---- a/e/f: bumper loop: 100 x (malloc 10 longs, y = x + 1, sum, free) ---- */
#define BUMPER_N 100
static long bumper_in[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

static inline uint64_t bumper_body(void) {
    uint64_t acc = 0;
    for (int k = 0; k < BUMPER_N; k++) {
        long *volatile vy = xmalloc(10 * sizeof(long)); /* volatile: keep the allocation */
        long *y = vy;
        for (int i = 0; i < 10; i++) y[i] = bumper_in[i] + 1;
        long s = 0;
        for (int i = 0; i < 10; i++) s += y[i];
        acc += (uint64_t)s;
        xfree(y);
    }
    return acc;
}

static double run_bumper(long regions, int use_regions) {
    uint64_t acc = 0;
    double t0 = now_ns();
    for (long r = 0; r < regions; r++) {
        if (use_regions) rbegin();
        acc += bumper_body();
        if (use_regions) rend();
    }
    double t = now_ns() - t0;
    sink += acc;
    return t / ((double)regions * BUMPER_N);
}

/* ---- b: LIFO of 64 blocks, 16..512 B ---- */
#define LIFO_N 64
static double run_lifo(long regions) {
    rng_t rng = {0x9E3779B97F4A7C15ull};
    void *blk[LIFO_N];
    uint64_t acc = 0;
    double t0 = now_ns();
    for (long r = 0; r < regions; r++) {
        rbegin();
        for (int i = 0; i < LIFO_N; i++) {
            size_t n = 16 + (size_t)(xs(&rng) % 497);
            char *p = xmalloc(n);
            p[0] = (char)i;
            blk[i] = p;
        }
        for (int i = LIFO_N - 1; i >= 0; i--) {
            acc += (unsigned char)((char *)blk[i])[0];
            xfree(blk[i]);
        }
        rend();
    }
    double t = now_ns() - t0;
    sink += acc;
    return t / ((double)regions * LIFO_N);
}

/* ---- c: 64 live blocks, log-uniform 16 B .. 2 MiB, touched, freed in random order ---- */
#define MIXED_N 64
static double run_mixed(long regions) {
    rng_t rng = {0xD1B54A32D192ED03ull};
    char *blk[MIXED_N];
    int order[MIXED_N];
    uint64_t acc = 0;
    double t0 = now_ns();
    for (long r = 0; r < regions; r++) {
        rbegin();
        for (int i = 0; i < MIXED_N; i++) {
            /* log2(size) uniform in [4, 21): 16 B .. 2 MiB */
            double e = 4.0 + 17.0 * (double)(xs(&rng) >> 11) * 0x1.0p-53;
            size_t n = (size_t)exp2(e);
            if (n < 16) n = 16;
            char *p = xmalloc(n);
            memset(p, (int)i, n < 64 ? n : 64);
            p[n - 1] = (char)i;
            blk[i] = p;
            order[i] = i;
        }
        for (int i = MIXED_N - 1; i > 0; i--) { /* Fisher-Yates free order */
            int j = (int)(xs(&rng) % (uint64_t)(i + 1));
            int tmp = order[i]; order[i] = order[j]; order[j] = tmp;
        }
        for (int i = 0; i < MIXED_N; i++) {
            acc += (unsigned char)blk[order[i]][0];
            xfree(blk[order[i]]);
        }
        rend();
    }
    double t = now_ns() - t0;
    sink += acc;
    return t / ((double)regions * MIXED_N);
}

/* ---- d: one 8 MiB temporary per region, fully memset ---- */
#define TEMP_SZ (8u << 20)
static double run_temp8m(long regions) {
    uint64_t acc = 0;
    double t0 = now_ns();
    for (long r = 0; r < regions; r++) {
        rbegin();
        char *p = xmalloc(TEMP_SZ);
        memset(p, (int)(r & 0x7f), TEMP_SZ);
        acc += (unsigned char)p[(r * 4099) % TEMP_SZ];
        xfree(p);
        rend();
    }
    double t = now_ns() - t0;
    sink += acc;
    return t / (double)regions / 1e3; /* us per region */
}

/* ---- copy: a chain of 64 KiB temporaries, each a memcpy of the one before (np.concatenate,
 * a copy of a step's array): t0 filled, t1 = copy of t0, ..., t3 = copy of t2, then all freed.
 * Two blocks handed out one after the other with 16-byte headers lie 16 bytes apart modulo
 * 4 KiB, where rep movsb is over 20x slower (4K aliasing); this measures that trap. */
#define COPY_SZ (64 << 10)
#define COPY_N 4
static double run_copy(long regions) {
    uint64_t acc = 0;
    double t0 = now_ns();
    for (long r = 0; r < regions; r++) {
        rbegin();
        char *t[COPY_N];
        t[0] = xmalloc(COPY_SZ);
        memset(t[0], (int)(r & 0x7f), COPY_SZ);
        for (int i = 1; i < COPY_N; i++) {
            t[i] = xmalloc(COPY_SZ);
            memcpy(t[i], t[i - 1], COPY_SZ);
        }
        acc += (unsigned char)t[COPY_N - 1][(r * 4099) % COPY_SZ];
        for (int i = COPY_N - 1; i >= 0; i--) xfree(t[i]);
        rend();
    }
    double t = now_ns() - t0;
    sink += acc;
    return t / (double)regions / 1e3; /* us per region */
}

/* ---- f: bumper regions on N threads ---- */
/* One thread's arguments and results, a cache line each: the threads write theirs while the
 * others run, and two on one line would time the line's moves between cores (the workload's
 * own false sharing), not the allocator. */
typedef struct {
    _Alignas(64) long regions;
    pthread_barrier_t *bar;
    double t0, t1;
    uint64_t acc;
} thr_arg;

static void *thr_main(void *vp) {
    thr_arg *a = vp;
    uint64_t acc = 0;
    for (int w = 0; w < 20; w++) { rbegin(); acc += bumper_body(); rend(); } /* warm-up */
    pthread_barrier_wait(a->bar);
    a->t0 = now_ns();
    for (long r = 0; r < a->regions; r++) { rbegin(); acc += bumper_body(); rend(); }
    a->t1 = now_ns();
    a->acc = acc;
    return NULL;
}

static double run_threads(int nthr, long regions) {
    pthread_t th[8];
    thr_arg arg[8];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nthr);
    for (int i = 0; i < nthr; i++) {
        arg[i] = (thr_arg){.regions = regions, .bar = &bar};
        if (pthread_create(&th[i], NULL, thr_main, &arg[i]) != 0) { perror("pthread_create"); exit(2); }
    }
    double t0 = 1e300, t1 = 0;
    for (int i = 0; i < nthr; i++) {
        pthread_join(th[i], NULL);
        if (arg[i].t0 < t0) t0 = arg[i].t0;
        if (arg[i].t1 > t1) t1 = arg[i].t1;
        sink += arg[i].acc;
    }
    pthread_barrier_destroy(&bar);
    return (double)nthr * (double)regions * BUMPER_N / ((t1 - t0) * 1e-9); /* allocs/s */
}

#define REPS 3
#define BEST(var, expr) do { var = 1e300; \
        for (int k_ = 0; k_ < REPS; k_++) { double v_ = (expr); if (v_ < var) var = v_; } } while (0)

static long scaled(long n, double f) { long v = (long)((double)n * f); return v < 1 ? 1 : v; }

static const char *only; /* comma-separated workload names, or NULL for all */
static int wanted(const char *name) {
    if (!only) return 1;
    size_t n = strlen(name);
    for (const char *s = only; (s = strstr(s, name)) != NULL; s += n)
        if ((s == only || s[-1] == ',') && (s[n] == ',' || s[n] == '\0')) return 1;
    return 0;
}

int main(int argc, char **argv) {
    double scale = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) scale = 0.1;
        else if (!strcmp(argv[i], "--floor")) floor_mode = 1;
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc) scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else { fprintf(stderr, "usage: %s [--quick] [--scale F] [--floor] [--only W1,W2,...]\n", argv[0]); return 1; }
    }
    *(void **)&region_begin_p = dlsym(RTLD_DEFAULT, "resize_region_begin"); /* POSIX idiom */
    *(void **)&region_end_p = dlsym(RTLD_DEFAULT, "resize_region_end");
    int (*stats_get)(struct resize_stats *, size_t);
    *(void **)&stats_get = dlsym(RTLD_DEFAULT, "resize_stats_get");
    printf("INFO regions %s\n", region_begin_p && region_end_p ? "resizealloc" : "none");

    /* warm-up (untimed), so every allocator starts from a steady state */
    if (wanted("bumper")) run_bumper(50, 1);
    if (wanted("lifo")) run_lifo(50);
    if (wanted("mixed")) run_mixed(5);
    if (wanted("temp8m")) run_temp8m(3);
    if (wanted("copy")) run_copy(200);
    if (wanted("outside")) run_bumper(50, 0);

    double v;
    /* each timed figure is the best of REPS runs of 1/REPS of the iterations (less noise) */
    if (wanted("bumper")) {
        BEST(v, run_bumper(scaled(100000 / REPS, scale), 1));
        printf("RESULT bumper %.3f ns/alloc\n", v);
    }
    if (wanted("lifo")) {
        BEST(v, run_lifo(scaled(100000 / REPS, scale)));
        printf("RESULT lifo %.3f ns/alloc\n", v);
    }
    if (wanted("mixed")) {
        BEST(v, run_mixed(scaled(5000 / REPS, scale)));
        printf("RESULT mixed %.3f ns/alloc\n", v);
    }
    if (wanted("temp8m")) {
        BEST(v, run_temp8m(scaled(200 / REPS, scale)));
        printf("RESULT temp8m %.3f us/region\n", v);
    }
    if (wanted("copy")) {
        BEST(v, run_copy(scaled(20000 / REPS, scale)));
        printf("RESULT copy %.3f us/region\n", v);
    }
    if (wanted("outside")) {
        BEST(v, run_bumper(scaled(100000 / REPS, scale), 0));
        printf("RESULT outside %.3f ns/alloc\n", v);
    }
    if (wanted("threads")) {
        long tr = scaled(100000 / REPS, scale);
        double th1 = 0, th2 = 0;
        for (int k = 0; k < REPS; k++) { /* best throughput of each */
            double a = run_threads(1, tr), b = run_threads(2, tr);
            if (a > th1) th1 = a;
            if (b > th2) th2 = b;
        }
        printf("RESULT threads1 %.0f allocs/s\n", th1);
        printf("RESULT threads2 %.0f allocs/s\n", th2);
        printf("RESULT thread_scaling %.3f x\n", th2 / th1);
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("RESULT peak_rss_kib %ld KiB\n", ru.ru_maxrss);
    if (stats_get) {
        struct resize_stats st;
        memset(&st, 0, sizeof st);
        stats_get(&st, sizeof st);
        printf("INFO resize_stats region_allocs=%llu overflow_allocs=%llu spilled_allocs=%llu "
               "resizes=%llu arena_capacity=%llu arena_committed=%llu arenas_denied=%llu\n",
               (unsigned long long)st.process.region_allocs, (unsigned long long)st.process.overflow_allocs,
               (unsigned long long)st.process.spilled_allocs, (unsigned long long)st.process.resizes,
               (unsigned long long)st.process.arena_capacity, (unsigned long long)st.process.arena_committed,
               (unsigned long long)st.process.arenas_denied);
    }
    if (region_errors) printf("INFO region_end_errors %d\n", region_errors);
    return region_errors ? 3 : 0;
}
