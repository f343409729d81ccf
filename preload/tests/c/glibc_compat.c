/* glibc_compat: glibc's extensions of the malloc family, run with and without the library.
 * The program is not linked against the library: when it is preloaded, the region markers and
 * resize_stats_get are found with dlsym, and the checks that only make sense for it run too.
 *
 *   glibc_compat libc      __libc_* names on arena and foreign blocks
 *   glibc_compat mallinfo  mallinfo2/mallinfo see 50 MiB allocated in a region
 *   glibc_compat trim      malloc_trim gives back an arena's unneeded memory
 *   glibc_compat info      malloc_info(0, stdout): one XML document (checked by the test)
 *   glibc_compat stats     malloc_stats() on stderr
 *
 * Every mode ends with "all ok" on success (on stderr for "info", whose stdout is the XML). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resizealloc.h"

/* mallinfo is deprecated in favour of mallinfo2, and still exported: both are checked. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

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

/* ------------------------------------------------------------------------------ mallinfo */

#define BLOCKS 1000
#define BLOCK (50 << 10) /* under glibc's mmap threshold: it serves them from its heap */

static void mallinfo_figures(void) {
    struct mallinfo2 a = mallinfo2();
    struct mallinfo ai = mallinfo();
    static unsigned char *blocks[BLOCKS];
    region_begin();
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(BLOCK);
        memset(blocks[i], i, BLOCK);
    }
    struct mallinfo2 b = mallinfo2();
    struct mallinfo bi = mallinfo();
    size_t total = (size_t)BLOCKS * BLOCK;
    /* uordblks (heap in use) + hblkhd (mmapped): where an allocator puts 50 MiB of live blocks */
    size_t grown = (b.uordblks + b.hblkhd) - (a.uordblks + a.hblkhd);
    size_t grown_int = (size_t)((unsigned)bi.uordblks + (unsigned)bi.hblkhd) - ((unsigned)ai.uordblks + (unsigned)ai.hblkhd);
    CHECK(grown >= total, "mallinfo2 counts 50 MiB of live blocks");
    CHECK(grown_int >= total, "mallinfo counts 50 MiB of live blocks");
    if (stats_get) {
        struct resize_stats s = stats();
        CHECK(s.thread.arena_committed >= total, "the arena served the blocks");
        CHECK(b.hblkhd >= s.process.arena_committed, "mallinfo2's hblkhd includes the arenas");
        CHECK(b.hblks >= 1, "mallinfo2's hblks counts the arena");
    }
    for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
    region_end();
}

/* ------------------------------------------------------------------------------ trim */

static void trim(void) {
    /* A region with a 32 MiB temporary and a small block that outlives it, at the end of the
     * arena; small regions afterwards shrink the arena's capacity; once the small block is
     * freed, nothing needs the memory above the capacity. */
    region_begin();
    unsigned char *big = malloc(32 << 20);
    memset(big, 1, 32 << 20);
    unsigned char *kept = malloc(100);
    free(big);
    region_end();
    for (int i = 0; i < 20; i++) {
        region_begin();
        unsigned char *x = malloc(1000);
        memset(x, 2, 1000);
        free(x);
        region_end();
    }
    free(kept);
    uint64_t before = stats().thread.arena_committed;
    int r = malloc_trim(0);
    uint64_t after = stats().thread.arena_committed;
    CHECK(r == 0 || r == 1, "malloc_trim returns 0 or 1");
    if (stats_get) {
        CHECK(before >= (32 << 20), "the arena holds the memory before the trim");
        CHECK(after < (1 << 20), "malloc_trim gave the arena's unneeded memory back");
        CHECK(r == 1, "malloc_trim says it released memory");
    }
}

/* ------------------------------------------------------------------------------ info, stats */

static void info(void) {
    region_begin();
    unsigned char *p = malloc(1 << 20);
    memset(p, 1, 1 << 20);
    int r = malloc_info(0, stdout);
    fflush(stdout);
    CHECK(r == 0, "malloc_info(0, stdout) returns 0");
    CHECK(malloc_info(1, stdout) == EINVAL, "malloc_info with options != 0 gives EINVAL");
    free(p);
    region_end();
}

static void stats_report(void) {
    region_begin();
    unsigned char *p = malloc(1 << 20);
    memset(p, 1, 1 << 20);
    malloc_stats();
    free(p);
    region_end();
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: glibc_compat libc|mallinfo|trim|info|stats\n");
        return 2;
    }
    find_library();
    const char *mode = argv[1];
    if (!strcmp(mode, "libc")) libc_names();
    else if (!strcmp(mode, "mallinfo")) mallinfo_figures();
    else if (!strcmp(mode, "trim")) trim();
    else if (!strcmp(mode, "info")) info();
    else if (!strcmp(mode, "stats")) stats_report();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (failures) return 1;
    fprintf(!strcmp(mode, "info") ? stderr : stdout, "all ok\n");
    return 0;
}
