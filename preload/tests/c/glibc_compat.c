/* glibc_compat: glibc's extensions of the malloc family, run with and without the library.
 * The program is not linked against the library: when it is preloaded, the region markers and
 * resize_stats_get are found with dlsym, and the checks that only make sense for it run too.
 *
 *   glibc_compat libc      __libc_* names on arena and foreign blocks
 *
 * Every mode ends with "all ok" on success. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resizealloc.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static int failures;
#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL: %s (%s:%d)\n", what, __FILE__, __LINE__);                       \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void nop(void) {}
static int nop_end(void) { return 0; }
static void (*region_begin)(void) = nop;
static int (*region_end)(void) = nop_end;
static int (*stats_get)(struct resize_stats *, size_t);

static void find_library(void) {
    void (*b)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    int (*e)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    if (b && e) {
        region_begin = b;
        region_end = e;
    }
    stats_get = (int (*)(struct resize_stats *, size_t))dlsym(RTLD_DEFAULT, "resize_stats_get");
}

static struct resize_stats stats(void) {
    struct resize_stats s;
    memset(&s, 0, sizeof s);
    if (stats_get) stats_get(&s, sizeof s);
    return s;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

/* ------------------------------------------------------------------------------ libc */

static void libc_names(void) {
    region_begin();
    uint64_t before = stats().thread.region_allocs;
    /* A block from malloc (an arena block in a region) freed by __libc_free, and back. */
    unsigned char *p = malloc(1000);
    memset(p, 1, 1000);
    __libc_free(p);
    p = __libc_malloc(1000);
    CHECK(p != NULL, "__libc_malloc");
    memset(p, 2, 1000);
    if (stats_get) CHECK(stats().thread.region_allocs >= before + 2, "__libc_malloc served by the arena in a region");
    free(p);
    /* __libc_realloc keeps the contents. */
    p = __libc_malloc(3000);
    memset(p, 3, 3000);
    p = __libc_realloc(p, 100000);
    CHECK(p && all_bytes(p, 3000, 3), "__libc_realloc keeps the contents");
    __libc_free(p);
    /* __libc_calloc zeroes reused memory. */
    p = malloc(4096);
    memset(p, 0xff, 4096);
    free(p);
    p = __libc_calloc(16, 256);
    CHECK(p && all_bytes(p, 4096, 0), "__libc_calloc zeroed");
    __libc_free(p);
    p = __libc_memalign(256, 100);
    CHECK(p && ((uintptr_t)p & 255) == 0, "__libc_memalign aligned");
    __libc_free(p);
    p = __libc_valloc(100);
    CHECK(p && ((uintptr_t)p & 4095) == 0, "__libc_valloc page aligned");
    __libc_free(p);
    p = __libc_pvalloc(100);
    CHECK(p && ((uintptr_t)p & 4095) == 0 && malloc_usable_size(p) >= 4096, "__libc_pvalloc a whole page");
    __libc_free(p);
    region_end();
    /* Outside a region: the next allocator's blocks, under either name. */
    p = __libc_malloc(500);
    free(p);
    p = malloc(500);
    __libc_free(p);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: glibc_compat libc\n");
        return 2;
    }
    find_library();
    const char *mode = argv[1];
    if (!strcmp(mode, "libc")) libc_names();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (failures) return 1;
    printf("all ok\n");
    return 0;
}
