/*
 * membench.h: what every program of the memory suite shares.
 *
 * The programs measure how much memory an allocator keeps for a known pattern of lifetimes
 * (scripts/mem_bench.sh runs them under glibc, mimalloc, jemalloc, tcmalloc and
 * libresizealloc.so; preload/tests/memory.rs runs the small versions as regression tests).
 *
 * - Region markers are looked up with dlsym(RTLD_DEFAULT, ...), so one binary runs under every
 *   allocator; where libresizealloc.so is not loaded they are no-ops.
 * - Every block carries a pattern derived from its key (the slot or record it belongs to):
 *   word 0 holds the size and a hash of the key, the rest a sequence seeded by the key.
 *   Blocks are checked before they are freed; a mismatch prints what was wrong and exits 3.
 * - Output is one line per figure: "result <text>" lines must be identical under every
 *   allocator; "metric <name> <value>" lines are measurements (ops_per_s, elapsed_s,
 *   rss_after_kib, hwm_kib).
 * - argv[1] is the scale (default 1): tests run e.g. 0.1; the sizes each scale changes are
 *   in each program's banner.
 */
#ifndef MEMBENCH_H
#define MEMBENCH_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- region markers */

static void (*mb_region_begin_p)(void);
static int (*mb_region_end_p)(void);

static void mb_init(void) {
    *(void **)&mb_region_begin_p = dlsym(RTLD_DEFAULT, "resize_region_begin"); /* POSIX idiom */
    *(void **)&mb_region_end_p = dlsym(RTLD_DEFAULT, "resize_region_end");
    if (!mb_region_begin_p || !mb_region_end_p) mb_region_begin_p = NULL, mb_region_end_p = NULL;
}

static inline void mb_region_begin(void) {
    if (mb_region_begin_p) mb_region_begin_p();
}

static inline void mb_region_end(void) {
    if (mb_region_end_p && mb_region_end_p() != 0) {
        fprintf(stderr, "membench: resize_region_end failed\n");
        exit(4);
    }
}

/* ---------------------------------------------------------------------------- randomness */

static inline uint64_t mb_mix(uint64_t x) { /* splitmix64 finaliser */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

typedef struct { uint64_t s; } mb_rng;

static inline uint64_t mb_next(mb_rng *r) { return mb_mix(r->s++); }

/* uniform in [lo, hi] */
static inline size_t mb_uniform(mb_rng *r, size_t lo, size_t hi) {
    return lo + (size_t)(mb_next(r) % (uint64_t)(hi - lo + 1));
}

/* log-uniform in [lo, hi]: every power of two between them is equally likely */
static inline size_t mb_log_uniform(mb_rng *r, size_t lo, size_t hi) {
    double u = (double)(mb_next(r) >> 11) * (1.0 / 9007199254740992.0);
    double v = exp(log((double)lo) + u * (log((double)hi + 1.0) - log((double)lo)));
    size_t n = (size_t)v;
    return n < lo ? lo : n > hi ? hi : n;
}

/* -------------------------------------------------------------------------- block pattern */

#define MB_STEP 0x9e3779b97f4a7c15ULL

/* Fills all n bytes (n >= 8) of p with the pattern of key. */
static inline void mb_fill(void *p, size_t n, uint64_t key) {
    uint64_t h = mb_mix(key);
    uint64_t *w = (uint64_t *)p;
    size_t nw = n / 8;
    w[0] = (h & 0xffffffff00000000ULL) | (uint64_t)(uint32_t)n;
    for (size_t i = 1; i < nw; i++) w[i] = h + i * MB_STEP;
    unsigned char *t = (unsigned char *)p;
    for (size_t i = nw * 8; i < n; i++) t[i] = (unsigned char)(h + i);
}

static void mb_corrupt(const char *what, uint64_t key, const void *p, size_t at) {
    fprintf(stderr, "membench: CORRUPTION %s: key %llu block %p offset %zu\n", what,
            (unsigned long long)key, p, at);
    exit(3);
}

/*
 * Checks the block of key and returns its size. Blocks up to 4 KiB are checked in full,
 * larger ones at the head, the tail and one word per 512 bytes (their fill touched every page).
 */
static inline size_t mb_check(const void *p, uint64_t key) {
    uint64_t h = mb_mix(key);
    const uint64_t *w = (const uint64_t *)p;
    if (!p) mb_corrupt("null block", key, p, 0);
    if ((w[0] & 0xffffffff00000000ULL) != (h & 0xffffffff00000000ULL))
        mb_corrupt("header (wrong key or overwritten)", key, p, 0);
    size_t n = (uint32_t)w[0];
    if (n < 8) mb_corrupt("size field", key, p, 0);
    size_t nw = n / 8, stride = n <= 4096 ? 1 : 64;
    for (size_t i = 1; i < nw; i += stride)
        if (w[i] != h + i * MB_STEP) mb_corrupt("body", key, p, i * 8);
    for (size_t i = nw > 8 ? nw - 8 : 1; i < nw; i++)
        if (w[i] != h + i * MB_STEP) mb_corrupt("tail", key, p, i * 8);
    const unsigned char *t = (const unsigned char *)p;
    for (size_t i = nw * 8; i < n; i++)
        if (t[i] != (unsigned char)(h + i)) mb_corrupt("last bytes", key, p, i);
    return n;
}

/* A checksum of the first n bytes of p. */
static inline uint64_t mb_sum(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* Checks, then frees; returns the size. */
static inline size_t mb_check_free(void *p, uint64_t key) {
    size_t n = mb_check(p, key);
    free(p);
    return n;
}

static inline void *mb_xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "membench: malloc(%zu) returned NULL\n", n);
        exit(2);
    }
    return p;
}

/* A filled block of n bytes for key. */
static inline void *mb_block(size_t n, uint64_t key) {
    void *p = mb_xmalloc(n);
    mb_fill(p, n, key);
    return p;
}

/* ----------------------------------------------------------------------- scale, time, RSS */

static double mb_scale(int argc, char **argv) {
    double s = argc > 1 ? atof(argv[1]) : 1.0;
    if (!(s > 0)) {
        fprintf(stderr, "usage: %s [scale > 0]\n", argv[0]);
        exit(1);
    }
    return s;
}

static long mb_scaled(long n, double scale, long min) {
    long v = (long)((double)n * scale);
    return v < min ? min : v;
}

static double mb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), read without allocating. */
static long mb_status_kib(const char *field) {
    char buf[8192];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    size_t fl = strlen(field);
    for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
        if (!strncmp(line, field, fl) && line[fl] == ':') return atol(line + fl + 1);
    return -1;
}

static void mb_metric(const char *name, double value) { printf("metric %s %.6g\n", name, value); }

/* The figures every program prints at the end. */
static void mb_finish(double elapsed_s) {
    mb_metric("elapsed_s", elapsed_s);
    mb_metric("rss_end_kib", (double)mb_status_kib("VmRSS"));
    mb_metric("hwm_kib", (double)mb_status_kib("VmHWM"));
    fflush(stdout);
}

#endif
