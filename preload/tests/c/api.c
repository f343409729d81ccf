/* Every exported malloc-family function and the C API, with glibc's edge cases.
 * Runs under LD_PRELOAD=libresizealloc.so; prints "ok <check>" lines, exits 1 on the first failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "resizealloc.h"

static int failures;
#define CHECK(cond, name) do { if (cond) printf("ok %s\n", name); else { printf("FAIL %s (line %d, errno %d)\n", name, __LINE__, errno); failures++; } } while (0)

static uint64_t region_allocs(void) {
    struct resize_stats s;
    resize_stats_get(&s, sizeof s);
    return s.thread.region_allocs;
}

static int filled(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++) if (p[i] != v) return 0;
    return 1;
}

static void edge_cases(const char *where) {
    char name[128];
#define NAME(s) (snprintf(name, sizeof name, "%s: %s", where, s), name)
    void *p = malloc(0);
    CHECK(p != NULL, NAME("malloc(0) returns a unique pointer"));
    void *q = malloc(0);
    CHECK(q != NULL && q != p, NAME("two malloc(0) differ"));
    free(p); free(q);
    free(NULL);
    CHECK(1, NAME("free(NULL) is a no-op"));

    p = realloc(NULL, 100);
    CHECK(p != NULL && ((uintptr_t)p & 15) == 0, NAME("realloc(NULL, n) is malloc, 16-aligned"));
    memset(p, 0x5A, 100);
    errno = 0;
    q = realloc(p, 0);
    CHECK(q == NULL, NAME("realloc(p, 0) frees and returns NULL"));

    errno = 0;
    p = calloc(SIZE_MAX / 2, 4);
    CHECK(p == NULL && errno == ENOMEM, NAME("calloc overflow -> NULL, ENOMEM"));
    p = calloc(1000, 8);
    CHECK(p != NULL && filled(p, 8000, 0), NAME("calloc zeroes"));
    memset(p, 0xFF, 8000);
    free(p);
    p = calloc(1000, 8);
    CHECK(p != NULL && filled(p, 8000, 0), NAME("calloc zeroes reused memory"));
    free(p);

    errno = 0;
    p = malloc(SIZE_MAX - 4096);
    CHECK(p == NULL && errno == ENOMEM, NAME("huge malloc -> NULL, ENOMEM"));
    errno = 0;
    p = malloc(SIZE_MAX);
    CHECK(p == NULL && errno == ENOMEM, NAME("malloc(SIZE_MAX) -> NULL, ENOMEM"));
    errno = 0;
    p = malloc((size_t)1 << 50);
    CHECK(p == NULL && errno == ENOMEM, NAME("2^50 malloc -> NULL, ENOMEM"));

    errno = 0;
    p = reallocarray(NULL, SIZE_MAX / 2, 3);
    CHECK(p == NULL && errno == ENOMEM, NAME("reallocarray overflow -> NULL, ENOMEM"));
    p = reallocarray(NULL, 10, 10);
    CHECK(p != NULL, NAME("reallocarray"));
    free(p);

    void *out = (void *)1;
    errno = 1234;
    int rc = posix_memalign(&out, 24, 100);
    CHECK(rc == EINVAL && out == (void *)1 && errno == 1234, NAME("posix_memalign bad alignment -> EINVAL, errno untouched"));
    rc = posix_memalign(&out, 4, 100);
    CHECK(rc == EINVAL, NAME("posix_memalign alignment below sizeof(void*) -> EINVAL"));
    rc = posix_memalign(&out, 64, (size_t)1 << 50);
    CHECK(rc == ENOMEM, NAME("posix_memalign huge -> ENOMEM"));
    errno = 0;
    p = aligned_alloc(48, 96); /* glibc 2.36: memalign's alias, which rounds the alignment up */
    CHECK(p != NULL && ((uintptr_t)p & 63) == 0, NAME("aligned_alloc rounds a bad alignment up, as glibc 2.36"));
    free(p);
    p = memalign(48, 96);
    CHECK(p != NULL && ((uintptr_t)p & 63) == 0, NAME("memalign rounds a bad alignment up"));
    free(p);
    errno = 0;
    p = memalign(SIZE_MAX, 16);
    CHECK(p == NULL && errno == EINVAL, NAME("memalign impossible alignment -> NULL, EINVAL"));

    for (size_t align = 16; align <= ((size_t)1 << 20); align <<= 1) {
        void *a = NULL;
        rc = posix_memalign(&a, align, 1000);
        void *b = aligned_alloc(align, 3 * align);
        void *c = memalign(align, 17);
        int good = rc == 0 && a && b && c && ((uintptr_t)a % align) == 0 && ((uintptr_t)b % align) == 0 && ((uintptr_t)c % align) == 0;
        if (good) { memset(a, 1, 1000); memset(b, 2, 3 * align); memset(c, 3, 17); }
        good = good && filled(a, 1000, 1) && filled(b, 3 * align, 2) && filled(c, 17, 3);
        char what[64];
        snprintf(what, sizeof what, "alignment %zu", align);
        CHECK(good, NAME(what));
        free(a); free(b); free(c);
    }
    p = valloc(100);
    CHECK(p && ((uintptr_t)p & 4095) == 0, NAME("valloc page aligned"));
    free(p);
    p = pvalloc(100);
    CHECK(p && ((uintptr_t)p & 4095) == 0 && malloc_usable_size(p) >= 4096, NAME("pvalloc page aligned, whole page"));
    free(p);
    errno = 0;
    p = pvalloc(SIZE_MAX - 10);
    CHECK(p == NULL && errno == ENOMEM, NAME("pvalloc overflow -> NULL, ENOMEM"));

    p = malloc(100);
    CHECK(malloc_usable_size(p) >= 100, NAME("malloc_usable_size >= request"));
    CHECK(malloc_usable_size(NULL) == 0, NAME("malloc_usable_size(NULL) == 0"));
    /* realloc growth and shrink keep contents */
    memset(p, 0x33, 100);
    p = realloc(p, 100000);
    CHECK(p && filled(p, 100, 0x33), NAME("realloc grow keeps contents"));
    memset(p, 0x44, 100000);
    p = realloc(p, 50);
    CHECK(p && filled(p, 50, 0x44), NAME("realloc shrink keeps contents"));
    free(p);
#undef NAME
}

int main(void) {
    CHECK(resize_region_depth() == 0, "depth 0 at start");
    CHECK(resize_region_end() != 0, "unbalanced end -> nonzero");
    edge_cases("outside");

    uint64_t before = region_allocs();
    resize_region_begin();
    CHECK(resize_region_depth() == 1, "depth 1 in a region");
    void *small = malloc(64);
    CHECK(region_allocs() > before, "malloc in a region is served by the arena");
    free(small);
    edge_cases("region");
    resize_region_begin();
    CHECK(resize_region_depth() == 2, "nested depth 2");
    CHECK(resize_region_end() == 0, "nested end");

    /* pointers crossing region boundaries through realloc */
    char *escaped = malloc(1000);
    memset(escaped, 0x77, 1000);
    CHECK(resize_region_end() == 0, "outermost end");
    CHECK(resize_region_end() != 0, "double end -> nonzero");
    for (int i = 0; i < 100; i++) {
        resize_region_begin();
        void *junk = malloc(4000);
        memset(junk, 0x11, 4000);
        free(junk);
        resize_region_end();
    }
    CHECK(filled((unsigned char *)escaped, 1000, 0x77), "escaped block survives later regions");
    escaped = realloc(escaped, 200000); /* outside: moves to the next allocator */
    CHECK(escaped && filled((unsigned char *)escaped, 1000, 0x77), "realloc outside moves an arena block with its contents");
    char *outside = malloc(500);
    memset(outside, 0x66, 500);
    resize_region_begin();
    outside = realloc(outside, 5000); /* inside: a system block stays with the system */
    CHECK(outside && filled((unsigned char *)outside, 500, 0x66), "realloc inside keeps a system block's contents");
    char *inside = malloc(100);
    memset(inside, 0x55, 100);
    for (int i = 0; i < 10; i++) inside = realloc(inside, 100 + 1000 * i);
    CHECK(filled((unsigned char *)inside, 100, 0x55), "realloc growth inside the region");
    resize_region_end();
    free(inside);
    free(outside);
    free(escaped);

    struct resize_stats s;
    CHECK(resize_stats_get(NULL, sizeof s) == -1, "stats(NULL) -> -1");
    CHECK(resize_stats_get(&s, sizeof s) == (int)sizeof s, "stats size matches the header");
    CHECK(s.thread.region_allocs > 0 && s.process.region_allocs >= s.thread.region_allocs && s.process.arenas_live >= 1, "stats figures");
    struct resize_thread_stats prefix;
    CHECK(resize_stats_get((struct resize_stats *)&prefix, sizeof prefix) == (int)sizeof s, "a smaller struct gets its prefix");
    resize_trim();
    CHECK(strlen(resize_version()) >= 5, "version string");
    if (failures) { printf("%d failures\n", failures); return 1; }
    printf("all ok\n");
    return 0;
}
