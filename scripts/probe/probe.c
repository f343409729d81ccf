/* probe.c: allocation-pattern stress probe for libresizealloc.so vs glibc (scripts/probe/run.sh
 * runs every mode under every configuration and flags pathologies).
 * Build: gcc -O2 -fno-builtin -pthread -o probe probe.c -ldl
 * Usage: ./probe MODE      (MODE as listed by ./probe with no argument)
 *        ./probe r_MODE    same pattern, each iteration wrapped in resize_region_begin/end
 *                          (when the symbols exist; no-op under plain glibc)
 * Prints: MODE time_ms=... hwm_kb=... rss_kb=... [extra] ; exit 3 on wrong data.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KiB (1024UL)
#define MiB (1024UL * 1024UL)

static void (*p_begin)(void);
static int (*p_end)(void);
static int g_region;
static char g_extra[512];

static inline void RB(void) { if (g_region && p_begin) p_begin(); }
static inline void RE(void) { if (g_region && p_end) p_end(); }

static void fail(const char *what, long a, long b) {
    fprintf(stderr, "WRONG DATA: %s (%ld, %ld)\n", what, a, b);
    fflush(stderr);
    _exit(3);
}
#define CHECK(c, a, b) do { if (!(c)) fail(#c, (long)(a), (long)(b)); } while (0)

static inline uint64_t xr(uint64_t *s) { uint64_t x = *s; x ^= x << 13; x ^= x >> 7; x ^= x << 17; return *s = x; }

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256]; long v = -1; size_t kl = strlen(key);
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) { v = atol(line + kl); break; }
    fclose(f);
    return v;
}

static void touch_full(char *p, size_t n, int val) { memset(p, val, n); }
static void touch_pages(char *p, size_t n, size_t stride, char v) { for (size_t i = 0; i < n; i += stride) p[i] = v; }

/* ---------------------------------------------------------------- modes */

static void m_big_full(void) { /* 64 MiB malloc, fully written, freed */
    for (int it = 0; it < 8; it++) {
        RB();
        char *volatile p = malloc(64 * MiB);
        CHECK(p, it, 0);
        touch_full(p, 64 * MiB, it + 1);
        CHECK(p[64 * MiB - 1] == it + 1, it, 0);
        free(p);
        RE();
    }
}

static void m_big_sparse(void) { /* 256 MiB malloc, one byte per MiB, freed */
    for (int it = 0; it < 200; it++) {
        RB();
        char *volatile p = malloc(256 * MiB);
        CHECK(p, it, 0);
        touch_pages(p, 256 * MiB, MiB, 7);
        CHECK(p[255 * MiB] == 7, it, 0);
        free(p);
        RE();
    }
}

static void m_big_kept(void) { /* 256 MiB malloc kept x 8 sparsely touched, then freed */
    char *volatile ps[8];
    for (int it = 0; it < 20; it++) {
        RB();
        for (int i = 0; i < 8; i++) { ps[i] = malloc(256 * MiB); CHECK(ps[i], it, i); touch_pages(ps[i], 256 * MiB, 4 * MiB, i); }
        for (int i = 0; i < 8; i++) { CHECK(ps[i][4 * MiB] == i, it, i); free(ps[i]); }
        RE();
    }
}

static void m_calloc_full(void) { /* calloc 8/16/40 MiB, check zero, write fully */
    static const size_t sz[] = { 8 * MiB, 16 * MiB, 40 * MiB };
    for (int it = 0; it < 30; it++) {
        RB();
        size_t n = sz[it % 3];
        unsigned char *volatile p = calloc(1, n);
        CHECK(p, it, 0);
        for (size_t i = 0; i < n; i += 4093) CHECK(p[i] == 0, it, i);
        CHECK(p[n - 1] == 0, it, n);
        touch_full((char *)p, n, 0xAB);
        free(p);
        RE();
    }
}

static void m_calloc_sparse(void) { /* the fixed pathology: calloc(256 MiB), 2 bytes written */
    for (int it = 0; it < 200; it++) {
        RB();
        unsigned char *volatile p = calloc(1, 256 * MiB);
        CHECK(p, it, 0);
        CHECK(p[it * 4096 + 1] == 0 && p[256 * MiB - 1 - it] == 0, it, 0);
        p[it * 4096 + 1] = 1; p[256 * MiB - 1 - it] = 2;
        free(p);
        RE();
    }
}

static void m_calloc_mixed(void) { /* calloc of many sizes (64 B .. 1 MiB), dirtied, freed, in a window */
    uint64_t s = 12345;
    unsigned char *volatile win[256] = {0};
    size_t wsz[256] = {0};
    for (int it = 0; it < 200000; it++) {
        if ((it & 1023) == 0) RB();
        int k = xr(&s) & 255;
        if (win[k]) { free(win[k]); }
        size_t n = 64 + (xr(&s) % (1 << (6 + (xr(&s) % 14))));
        unsigned char *p = calloc(1, n);
        CHECK(p, it, n);
        CHECK(p[0] == 0 && p[n / 2] == 0 && p[n - 1] == 0, it, n);
        memset(p, 0xFF, n < 4096 ? n : 4096); p[n - 1] = 0xFF;
        win[k] = p; wsz[k] = n;
        if ((it & 1023) == 1023) RE();
    }
    for (int k = 0; k < 256; k++) free(win[k]);
    (void)wsz;
}

static void m_realloc_grow(void) { /* 1 KiB -> 512 MiB doubling, then shrink back */
    for (int rep = 0; rep < 1; rep++) {
        RB();
        size_t n = KiB;
        char *volatile p = malloc(n);
        memset(p, 0x5A, n);
        while (n < 512 * MiB) {
            size_t m = n * 2;
            p = realloc(p, m);
            CHECK(p, n, 0);
            CHECK(p[0] == 0x5A && p[n - 1] == 0x5A && p[n / 2] == 0x5A, n, 0);
            touch_pages(p + n, m - n, 4096, 0x5A); p[m - 1] = 0x5A;
            n = m;
        }
        while (n > KiB) {
            n /= 2;
            p = realloc(p, n);
            CHECK(p, n, 0);
            CHECK(p[0] == 0x5A && p[n - 1] == 0x5A, n, 0);
        }
        free(p);
        RE();
    }
}

static void m_realloc_pingpong(void) { /* 1 MiB <-> 100 MiB */
    char *volatile p = malloc(MiB);
    memset(p, 1, MiB);
    for (int it = 0; it < 60; it++) {
        RB();
        p = realloc(p, 100 * MiB); CHECK(p, it, 0);
        CHECK(p[0] == 1 && p[MiB - 1] == 1, it, 0);
        touch_pages(p + MiB, 99 * MiB, 64 * KiB, 2);
        p = realloc(p, MiB); CHECK(p, it, 1);
        CHECK(p[0] == 1 && p[MiB - 1] == 1, it, 1);
        RE();
    }
    free(p);
}

static void m_realloc_inc(void) { /* string append: realloc by +16 B up to 4 MiB, small blocks between */
    void *volatile junk[64] = {0};
    for (int rep = 0; rep < 2; rep++) {
        RB();
        size_t n = 16;
        char *volatile p = malloc(n);
        memset(p, 'a', n);
        int j = 0;
        while (n < 4 * MiB) {
            p = realloc(p, n + 16);
            CHECK(p, n, 0);
            memset(p + n, 'a', 16);
            n += 16;
            if ((n & 255) == 0) { free(junk[j & 63]); junk[j & 63] = malloc(32 + (j & 127)); j++; }
        }
        CHECK(p[0] == 'a' && p[n / 3] == 'a' && p[n - 1] == 'a', n, 0);
        free(p);
        RE();
    }
    for (int i = 0; i < 64; i++) free(junk[i]);
}

static void m_memalign_loop(void) { /* alignments 4K/64K/2M, sizes just above, alloc+free */
    static const size_t al[] = { 4 * KiB, 64 * KiB, 2 * MiB };
    for (int it = 0; it < 30000; it++) {
        if ((it & 255) == 0) RB();
        size_t a = al[it % 3];
        size_t n = a + 16 + (it % 7) * 8;
        void *p = NULL;
        int r;
        if (it & 1) r = posix_memalign(&p, a, n); else { p = aligned_alloc(a, n + (a - n % a) % a); r = p ? 0 : errno; }
        CHECK(r == 0 && p, it, r);
        CHECK(((uintptr_t)p & (a - 1)) == 0, it, a);
        ((char *)p)[0] = 1; ((char *)p)[n - 1] = 2;
        free(p);
        if ((it & 255) == 255) RE();
    }
}

static void m_memalign_keep(void) { /* keep 10000 x 4K-aligned, 10000 x 64K-aligned, 1000 x 2M-aligned */
    static const size_t al[] = { 4 * KiB, 64 * KiB, 2 * MiB };
    static const int cnt[] = { 10000, 10000, 1000 };
    RB();
    for (int k = 0; k < 3; k++) {
        void **keep = malloc(sizeof(void *) * cnt[k]);
        for (int i = 0; i < cnt[k]; i++) {
            void *p = NULL;
            CHECK(posix_memalign(&p, al[k], al[k] + 64) == 0 && p, k, i);
            CHECK(((uintptr_t)p & (al[k] - 1)) == 0, k, i);
            memset(p, i & 0xFF, 128);
            keep[i] = p;
        }
        for (int i = 0; i < cnt[k]; i++) { CHECK(((unsigned char *)keep[i])[100] == (i & 0xFF), k, i); free(keep[i]); }
        free(keep);
    }
    RE();
}

static void m_memalign_small(void) { /* 200k kept small blocks aligned 64/256/1024 */
    enum { N = 200000 };
    void **keep = malloc(sizeof(void *) * N);
    RB();
    for (int i = 0; i < N; i++) {
        size_t a = (size_t)64 << ((i % 3) * 2);
        void *p = memalign(a, 48);
        CHECK(p && ((uintptr_t)p & (a - 1)) == 0, i, a);
        memset(p, 3, 48);
        keep[i] = p;
    }
    for (int i = 0; i < N; i++) free(keep[i]);
    RE();
    free(keep);
}

static void *thr_worker(void *arg) {
    uint64_t s = (uintptr_t)arg * 7919 + 1;
    void *volatile win[32] = {0};
    size_t total = 0;
    RB();
    while (total < 50 * 1000 * 1000) {
        int k = xr(&s) & 31;
        free(win[k]);
        size_t n = 16 + xr(&s) % 1024;
        char *p = malloc(n);
        CHECK(p, n, 0);
        p[0] = 1; p[n - 1] = 1;
        win[k] = p;
        total += n;
    }
    for (int k = 0; k < 32; k++) free(win[k]);
    unsigned char *volatile c = calloc(1, 24 * MiB);
    CHECK(c && c[12 * MiB] == 0, 0, 0);
    memset(c, 9, 24 * MiB);
    free(c);
    RE();
    return NULL;
}

static void m_threads(void) { /* 64 short-lived threads, 8 at a time */
    for (int b = 0; b < 8; b++) {
        pthread_t t[8];
        for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, thr_worker, (void *)(uintptr_t)(b * 8 + i + 1));
        for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    }
}

static void m_window_churn(void) { /* one thread: 8 times 50 MB of churn through 32 live blocks */
    for (int i = 0; i < 8; i++) thr_worker((void *)(uintptr_t)(i + 1));
}

/* SPSC ring */
#define QN 4096
static void *volatile q[QN];
static volatile size_t qh, qt;
static const long PC_N = 1000000;

static void *consumer(void *arg) {
    (void)arg;
    for (long i = 0; i < PC_N; i++) {
        while (__atomic_load_n(&qt, __ATOMIC_ACQUIRE) == __atomic_load_n(&qh, __ATOMIC_ACQUIRE)) sched_yield();
        size_t t = qt;
        unsigned char *p = q[t % QN];
        size_t n = 64 + (i * 2654435761UL) % 4033;
        CHECK(p[0] == (unsigned char)i && p[n - 1] == (unsigned char)(i >> 3), i, n);
        free(p);
        __atomic_store_n(&qt, t + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void m_prodcons(void) { /* one thread mallocs, another frees */
    pthread_t c;
    pthread_create(&c, NULL, consumer, NULL);
    RB();
    for (long i = 0; i < PC_N; i++) {
        size_t n = 64 + (i * 2654435761UL) % 4033;
        unsigned char *p = malloc(n);
        CHECK(p, i, n);
        p[0] = (unsigned char)i; p[n - 1] = (unsigned char)(i >> 3);
        while (__atomic_load_n(&qh, __ATOMIC_ACQUIRE) - __atomic_load_n(&qt, __ATOMIC_ACQUIRE) >= QN) sched_yield();
        q[qh % QN] = p;
        __atomic_store_n(&qh, qh + 1, __ATOMIC_RELEASE);
        if ((i & 8191) == 8191) { RE(); RB(); }
    }
    RE();
    pthread_join(c, NULL);
}

static void m_vector_grow(void) { /* realloc by 1.5x to 200 MB, many small blocks kept between */
    enum { SMALL = 400000 };
    void **keep = malloc(sizeof(void *) * SMALL);
    int nk = 0;
    for (int rep = 0; rep < 2; rep++) {
        RB();
        size_t n = 64;
        unsigned char *volatile v = malloc(n);
        memset(v, 0x11, n);
        while (n < 200 * 1000 * 1000) {
            size_t m = n + n / 2;
            v = realloc(v, m);
            CHECK(v && v[n - 1] == 0x11 && v[0] == 0x11, n, 0);
            memset(v + n, 0x11, m - n);
            for (int i = 0; i < 8000 && nk < SMALL; i++) { keep[nk] = malloc(24 + (i & 63)); ((char *)keep[nk])[0] = 1; nk++; }
            n = m;
        }
        free(v);
        for (int i = 0; i < nk; i++) free(keep[i]);
        nk = 0;
        RE();
    }
    free(keep);
}

static void m_usable_trim(void) { /* malloc_usable_size / malloc_trim / mallopt interleaved */
    uint64_t s = 99;
    void *volatile win[512] = {0};
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_TRIM_THRESHOLD, 512 * 1024);
    for (int it = 0; it < 200000; it++) {
        if ((it & 1023) == 0) RB();
        int k = xr(&s) & 511;
        free(win[k]);
        size_t n = 1 + xr(&s) % ((it & 15) ? 2048 : 600000);
        char *p = malloc(n);
        CHECK(p, it, n);
        size_t u = malloc_usable_size(p);
        CHECK(u >= n, u, n);
        memset(p, 0x33, u < 8192 ? u : 8192); p[u - 1] = 0x33; /* write whole usable tail */
        win[k] = p;
        if ((it % 5000) == 4999) malloc_trim(0);
        if ((it & 1023) == 1023) RE();
    }
    for (int k = 0; k < 512; k++) free(win[k]);
    malloc_trim(0);
}

static void m_tiny_many(void) { /* 10M x 16 B long-lived, then free all, RSS after */
    enum { N = 10000000 };
    void **keep = malloc(sizeof(void *) * N);
    RB();
    for (int i = 0; i < N; i++) { uint32_t *p = malloc(16); CHECK(p, i, 0); p[0] = i; keep[i] = p; }
    for (int i = 0; i < N; i += 9973) CHECK(*(uint32_t *)keep[i] == (uint32_t)i, i, 0);
    for (int i = 0; i < N; i++) free(keep[i]);
    RE();
    free(keep);
    snprintf(g_extra, sizeof g_extra, "rss_after_free_kb=%ld", status_kb("VmRSS:"));
}

static void m_frag(void) { /* 1M x 100 B, free every other, then 1M x 200 B; RSS */
    enum { N = 1000000 };
    void **a = malloc(sizeof(void *) * N), **b = malloc(sizeof(void *) * N);
    RB();
    for (int i = 0; i < N; i++) { a[i] = malloc(100); memset(a[i], 1, 100); }
    for (int i = 0; i < N; i += 2) { free(a[i]); a[i] = NULL; }
    for (int i = 0; i < N; i++) { b[i] = malloc(200); memset(b[i], 2, 200); }
    for (int i = 1; i < N; i += 2) CHECK(((char *)a[i])[99] == 1, i, 0);
    long rss = status_kb("VmRSS:");
    for (int i = 0; i < N; i++) { free(a[i]); free(b[i]); }
    RE();
    free(a); free(b);
    snprintf(g_extra, sizeof g_extra, "rss_mid_kb=%ld rss_after_free_kb=%ld", rss, status_kb("VmRSS:"));
}

static void m_fork(void) { /* allocate 200 MB, fork, child allocs/frees and exits */
    char *volatile big = malloc(200 * MiB);
    memset(big, 0x42, 200 * MiB);
    void *volatile smalls[1000];
    for (int i = 0; i < 1000; i++) smalls[i] = malloc(100 + i);
    for (int it = 0; it < 4; it++) {
        RB();
        pid_t pid = fork();
        if (pid == 0) {
            if (big[123456] != 0x42) _exit(5);
            for (int i = 0; i < 1000; i++) free(smalls[i]);
            for (int i = 0; i < 200000; i++) { void *p = malloc(32 + i % 500); ((char *)p)[0] = 1; free(p); }
            char *c = calloc(1, 32 * MiB); if (!c || c[MiB] != 0) _exit(6); memset(c, 1, 32 * MiB); free(c);
            void *pt; pthread_t t;
            if (pthread_create(&t, NULL, thr_worker, (void *)1) == 0) pthread_join(t, &pt);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, st, it);
        RE();
    }
    for (int i = 0; i < 1000; i++) free(smalls[i]);
    free(big);
}

static void m_small_churn(void) { /* 10M random small alloc/free in a 4096 window */
    uint64_t s = 7;
    void *volatile win[4096] = {0};
    for (long it = 0; it < 10000000; it++) {
        if ((it & 65535) == 0) RB();
        int k = xr(&s) & 4095;
        free(win[k]);
        size_t n = 8 + (xr(&s) & 255);
        char *p = malloc(n); p[0] = 1;
        win[k] = p;
        if ((it & 65535) == 65535) RE();
    }
    for (int k = 0; k < 4096; k++) free(win[k]);
}

static void *long_list[200000];
static void m_lifetime_flip(void) { /* one call site alternates long-lived and short-lived phases */
    for (int ph = 0; ph < 40; ph++) {
        RB();
        if (ph & 1) {
            for (int i = 0; i < 200000; i++) long_list[i] = malloc(64 + (i & 63));
            for (int i = 0; i < 200000; i++) ((char *)long_list[i])[0] = 1;
            /* freed in the next phase */
        } else {
            for (int i = 0; i < 200000; i++) { void *p = malloc(64 + (i & 63)); ((char *)p)[0] = 1; free(p); if (long_list[i]) { free(long_list[i]); long_list[i] = NULL; } }
        }
        RE();
    }
    for (int i = 0; i < 200000; i++) free(long_list[i]);
}

static void m_escape(void) { /* each iteration allocates ~2 MB of small temporaries; 1 block in 1000 escapes */
    enum { ITER = 400, PER = 20000 };
    void **esc = malloc(sizeof(void *) * ITER * (PER / 1000 + 1));
    int ne = 0;
    for (int it = 0; it < ITER; it++) {
        RB();
        void *volatile tmp[256] = {0};
        for (int i = 0; i < PER; i++) {
            char *p = malloc(100);
            p[0] = 1;
            if (i % 1000 == 999) esc[ne++] = p;
            else { free(tmp[i & 255]); tmp[i & 255] = p; }
        }
        for (int i = 0; i < 256; i++) free(tmp[i]);
        RE();
    }
    for (int i = 0; i < ne; i++) CHECK(((char *)esc[i])[0] == 1, i, 0);
    long rss = status_kb("VmRSS:");
    for (int i = 0; i < ne; i++) free(esc[i]);
    free(esc);
    snprintf(g_extra, sizeof g_extra, "escaped=%d rss_with_escapees_kb=%ld", ne, rss);
}

static void m_big_escape(void) { /* each iteration: 32 MiB temp + 64 KiB block that escapes and is freed 10 iters later */
    void *volatile ring[10] = {0};
    for (int it = 0; it < 15; it++) {
        RB();
        char *volatile t = malloc(32 * MiB);
        touch_pages(t, 32 * MiB, 4096, 1);
        char *e = malloc(64 * KiB); memset(e, 2, 64 * KiB);
        free(ring[it % 10]); ring[it % 10] = e;
        free(t);
        RE();
    }
    for (int i = 0; i < 10; i++) free(ring[i]);
}

static void *big_q[16];
static volatile int big_qn;
static void *big_freer(void *arg) {
    (void)arg;
    int done = 0;
    while (done < 16) {
        while (__atomic_load_n(&big_qn, __ATOMIC_ACQUIRE) <= done) sched_yield();
        char *p = big_q[done];
        CHECK(p[0] == (char)done, done, 0);
        free(p);
        done++;
    }
    return NULL;
}
static void m_cross_big(void) { /* thread A allocates 32 MiB blocks, thread B frees them */
    pthread_t t;
    pthread_create(&t, NULL, big_freer, NULL);
    for (int i = 0; i < 16; i++) {
        RB();
        char *p = malloc(32 * MiB);
        touch_pages(p, 32 * MiB, 4096, (char)i);
        big_q[i] = p;
        __atomic_store_n(&big_qn, i + 1, __ATOMIC_RELEASE);
        RE();
    }
    pthread_join(t, NULL);
}

static volatile size_t hbig = (size_t)1 << 40, hneg = (size_t)-4096;
static void m_huge_fail(void) { /* failing huge requests must return NULL cheaply, in a loop */
    for (int it = 0; it < 2000; it++) {
        RB();
        void *volatile p = malloc((size_t)1 << 46);       /* 64 TiB */
        CHECK(p == NULL, it, 0);
        void *volatile c = calloc(hbig, hbig); /* overflow */
        CHECK(c == NULL, it, 1);
        void *volatile r = malloc(10); CHECK(r, it, 2);
        void *volatile r2 = realloc(r, hneg); CHECK(r2 == NULL, it, 3);
        free(r);
        void *a = NULL;
        CHECK(posix_memalign(&a, 3 * 8, 64) == EINVAL, it, 4);
        RE();
    }
}

static void m_medium_keep(void) { /* 2000 kept 100 KiB..1 MiB blocks, half freed, refilled; mmap-threshold range */
    uint64_t s = 5;
    enum { N = 600 };
    void *volatile k[N] = {0};
    for (int round = 0; round < 6; round++) {
        RB();
        for (int i = 0; i < N; i++) if (!k[i]) { size_t n = 100 * KiB + xr(&s) % (900 * KiB); k[i] = malloc(n); touch_pages(k[i], n, 8192, 1); }
        for (int i = round & 1; i < N; i += 2) { free(k[i]); k[i] = NULL; }
        RE();
    }
    for (int i = 0; i < N; i++) free(k[i]);
}

struct mode { const char *name; void (*fn)(void); };
static const struct mode modes[] = {
    { "big_full", m_big_full },         { "big_sparse", m_big_sparse },
    { "big_kept", m_big_kept },         { "calloc_full", m_calloc_full },
    { "calloc_sparse", m_calloc_sparse }, { "calloc_mixed", m_calloc_mixed },
    { "realloc_grow", m_realloc_grow }, { "realloc_pingpong", m_realloc_pingpong },
    { "realloc_inc", m_realloc_inc },   { "memalign_loop", m_memalign_loop },
    { "memalign_keep", m_memalign_keep }, { "memalign_small", m_memalign_small },
    { "threads", m_threads },           { "window_churn", m_window_churn },
    { "prodcons", m_prodcons },
    { "vector_grow", m_vector_grow },   { "usable_trim", m_usable_trim },
    { "tiny_many", m_tiny_many },       { "frag", m_frag },
    { "fork", m_fork },                 { "small_churn", m_small_churn },
    { "lifetime_flip", m_lifetime_flip }, { "escape", m_escape },
    { "big_escape", m_big_escape },     { "cross_big", m_cross_big },
    { "huge_fail", m_huge_fail },       { "medium_keep", m_medium_keep },
};

int main(int argc, char **argv) {
    size_t nm = sizeof modes / sizeof modes[0];
    if (argc < 2) { for (size_t i = 0; i < nm; i++) printf("%s\n", modes[i].name); return 0; }
    const char *m = argv[1];
    if (!strncmp(m, "r_", 2)) { g_region = 1; m += 2; }
    p_begin = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    p_end = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    for (size_t i = 0; i < nm; i++) {
        if (strcmp(modes[i].name, m)) continue;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        modes[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
        printf("%s time_ms=%.1f hwm_kb=%ld rss_kb=%ld %s\n", argv[1], ms, status_kb("VmHWM:"), status_kb("VmRSS:"), g_extra);
        int (*p_stats)(uint64_t *, size_t) = (int (*)(uint64_t *, size_t))dlsym(RTLD_DEFAULT, "resize_stats_get");
        if (getenv("PROBE_STATS") && p_stats) { /* struct resize_stats as 35 u64 (resizealloc.h) */
            uint64_t st[64] = {0};
            p_stats(st, sizeof(uint64_t) * 35);
            printf("  stats: capacity=%lu committed=%lu region_allocs=%lu overflow=%lu spilled=%lu resizes=%lu "
                   "| proc_resident=%lu proc_live=%lu granules_given_back=%lu bound_closures=%lu turned_away=%lu "
                   "routed_away=%lu learned_long=%lu learned_short=%lu long_now=%lu | small_pages=%lu\n",
                   st[8], st[9], st[11], st[12], st[13], st[14], st[21], st[22], st[24], st[25], st[26], st[27], st[28], st[29], st[30], st[31]);
        }
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
