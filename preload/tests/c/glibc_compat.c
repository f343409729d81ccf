/* glibc_compat: glibc's extensions of the malloc family, run with and without the library.
 * The program is not linked against the library: when it is preloaded, the region markers and
 * resize_stats_get are found with dlsym, and the checks that only make sense for it run too.
 *
 *   glibc_compat libc      __libc_* names on arena and foreign blocks
 *   glibc_compat mallinfo  mallinfo2/mallinfo see 50 MiB allocated in a region
 *   glibc_compat trim      malloc_trim gives back an arena's unneeded memory
 *   glibc_compat info      malloc_info(0, stdout): one XML document (checked by the test)
 *   glibc_compat stats     malloc_stats() on stderr
 *   glibc_compat same      mallopt, malloc_usable_size and posix_memalign: output that must be
 *                          the same with and without the library
 *   glibc_compat boot      blocks from the library's bootstrap buffer (needs boot_shim.so
 *                          preloaded in front of the library)
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

/* uordblks + hblkhd, and the thread's live arena bytes. */
static size_t in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}
static size_t thread_live(void) { return (size_t)stats().memory.thread_live; }

/* One step of work in a region: blocks through each fast path of the arena (small blocks,
 * calloc, realloc growing the last block in place, a block of pages), all freed before the
 * end. With `check`, the figures must see each path's blocks at once, although the arena
 * counts them only later (the uncounted range). Small enough for the check-invariants build,
 * whose walk after every call is linear in the uncounted range. */
#define STEP_SMALL 300
#define STEP_ZEROED 200
#define STEP_GROWN (64u << 10)
#define STEP_BIG (4u << 20)
static void fast_path_step(int check) {
    region_begin();
    size_t u0 = in_use(), l0 = thread_live();
    static void *small[STEP_SMALL];
    for (int i = 0; i < STEP_SMALL; i++) small[i] = malloc(100); /* the small fast path */
    if (check) {
        CHECK(in_use() - u0 >= STEP_SMALL * 100, "mallinfo2 sees the blocks of the small fast path");
        CHECK(thread_live() - l0 >= STEP_SMALL * 100, "thread_live sees the blocks of the small fast path");
    }
    static void *zeroed[STEP_ZEROED];
    size_t u1 = in_use();
    for (int i = 0; i < STEP_ZEROED; i++) zeroed[i] = calloc(1, 200); /* calloc's fast path */
    if (check) CHECK(in_use() - u1 >= STEP_ZEROED * 200, "mallinfo2 sees the blocks of calloc's fast path");
    size_t u2 = in_use();
    char *grown = malloc(16);
    for (size_t n = 32; n <= STEP_GROWN; n *= 2) grown = realloc(grown, n); /* in place */
    if (check) CHECK(in_use() - u2 >= STEP_GROWN, "mallinfo2 sees a block realloc grew in place");
    size_t u3 = in_use(), l3 = thread_live();
    char *big = malloc(STEP_BIG); /* a block of pages: the aligned fast path */
    big[0] = 1;
    struct mallinfo mi = mallinfo();
    if (check) {
        CHECK(in_use() - u3 >= STEP_BIG, "mallinfo2 sees a block of the aligned fast path");
        CHECK((size_t)(unsigned)mi.uordblks + (size_t)(unsigned)mi.hblkhd >= STEP_BIG, "mallinfo sees a block of the aligned fast path");
        CHECK(thread_live() - l3 >= STEP_BIG, "thread_live sees a block of the aligned fast path");
    }
    free(big);
    free(grown);
    for (int i = 0; i < STEP_ZEROED; i++) free(zeroed[i]);
    for (int i = 0; i < STEP_SMALL; i++) free(small[i]);
    if (check) CHECK(thread_live() <= l0, "thread_live drops back once the blocks are freed");
    region_end();
}

/* The first steps size the arena and its run to the work; the last runs on the fast paths
 * alone. */
static void warm_arena_paths(void) {
    for (int i = 0; i < 3; i++) fast_path_step(0);
    fast_path_step(1);
}

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
        CHECK(s.memory.thread_live >= total, "resize_stats_get's thread_live counts the blocks");
        CHECK(b.uordblks >= s.memory.process_live && s.memory.process_live >= total, "mallinfo2's uordblks includes the arenas' live blocks");
        CHECK(b.arena >= s.memory.process_resident, "mallinfo2's arena counts the arenas' resident memory");
        CHECK(b.hblkhd < a.hblkhd + total && b.hblks == a.hblks, "mallinfo2's hblkhd and hblks stay glibc's mmapped chunks");
    }
    for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
    region_end();
    if (stats_get) warm_arena_paths();
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
    /* Small blocks outside the region: the small-block heap's in process mode. */
    enum { SMALL = 2000 };
    static void *small[SMALL];
    for (int i = 0; i < SMALL; i++) {
        small[i] = malloc(64);
        CHECK(small[i] != NULL, "malloc(64)");
    }
    region_begin();
    unsigned char *p = malloc(1 << 20);
    memset(p, 1, 1 << 20);
    malloc_stats();
    free(p);
    region_end();
    for (int i = 0; i < SMALL; i++) free(small[i]);
}

/* ------------------------------------------------------------------------------ same as glibc */

static void same_as_glibc(void) {
    /* mallopt: glibc's answers (the library does not export it). */
    printf("mallopt M_TRIM_THRESHOLD %d\n", mallopt(M_TRIM_THRESHOLD, 1 << 20));
    printf("mallopt M_MMAP_THRESHOLD %d\n", mallopt(M_MMAP_THRESHOLD, 256 << 10));
    printf("mallopt M_MMAP_THRESHOLD too big %d\n", mallopt(M_MMAP_THRESHOLD, 1 << 30));
    printf("mallopt M_ARENA_MAX %d\n", mallopt(M_ARENA_MAX, 4));
    printf("mallopt unknown %d\n", mallopt(12345, 1));
    /* malloc_usable_size of the next allocator's blocks (outside regions): glibc's sizes. */
    size_t sizes[] = {1, 24, 100, 1000, 5000, 200000, 3 << 20};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = malloc(sizes[i]);
        printf("usable(malloc(%zu)) %zu\n", sizes[i], malloc_usable_size(p));
        free(p);
    }
    printf("usable(NULL) %zu\n", malloc_usable_size(NULL));
    /* Inside a region: at least the request. */
    region_begin();
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = malloc(sizes[i]);
        CHECK(malloc_usable_size(p) >= sizes[i], "usable size >= request in a region");
        free(p);
    }
    region_end();
    /* posix_memalign: EINVAL unless a power of two multiple of sizeof(void *); *out untouched
     * on error. errno is printed for EINVAL only: on ENOMEM glibc 2.36 also sets errno (from
     * its internal memalign), the library leaves it alone (the man page's "errno is not set"). */
    size_t aligns[] = {0, 1, 2, 4, 8, 12, 16, 24, 32, 48, 4096, (size_t)1 << 40, SIZE_MAX};
    for (int in_region = 0; in_region < 2; in_region++) {
        if (in_region) region_begin();
        for (unsigned i = 0; i < sizeof aligns / sizeof *aligns; i++) {
            void *out = (void *)0x1234;
            errno = 0;
            int r = posix_memalign(&out, aligns[i], 100);
            int ok = r == 0 && out != (void *)0x1234 && ((uintptr_t)out % aligns[i]) == 0;
            printf("%s posix_memalign(align %zu) = %d, errno %d, %s\n", in_region ? "region" : "outside", aligns[i], r,
                   r == EINVAL ? errno : -1,
                   r == 0 ? (ok ? "aligned block" : "BAD BLOCK") : (out == (void *)0x1234 ? "out untouched" : "OUT WRITTEN"));
            if (r == 0) free(out);
        }
        if (in_region) region_end();
    }
}

/* ------------------------------------------------------------------------------ bootstrap */

static void bootstrap_blocks(void) {
    /* The library looks the next allocator up on the first allocation that needs it. */
    free(malloc(10));
    void **blocks = (void **)dlsym(RTLD_DEFAULT, "boot_shim_blocks");
    size_t *size = (size_t *)dlsym(RTLD_DEFAULT, "boot_shim_size");
    if (!blocks || !size) {
        fprintf(stderr, "FAIL: boot_shim.so is not preloaded\n");
        failures++;
        return;
    }
    unsigned char *a = blocks[0], *b = blocks[1];
    CHECK(a && b, "the shim got two blocks while the library looked up malloc");
    if (!a || !b) return;
    size_t n = *size;
    CHECK(all_bytes(a, n, 0x5a) && all_bytes(b, n, 0x5a), "bootstrap blocks hold what was written");
    /* glibc would round 100 up to 104: the exact size shows these are bootstrap blocks. */
    CHECK(malloc_usable_size(a) == n && malloc_usable_size(b) == n, "usable size of a bootstrap block");
    /* realloc copies a bootstrap block out. */
    unsigned char *c = realloc(a, 100000);
    CHECK(c && all_bytes(c, n, 0x5a), "realloc of a bootstrap block keeps the contents");
    memset(c, 1, 100000);
    free(c);
    /* free and __libc_free accept them (the buffer is never given to the next allocator). */
    __libc_free(b);
    b = malloc(n);
    memset(b, 2, n);
    free(b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: glibc_compat libc|mallinfo|trim|info|stats|same\n");
        return 2;
    }
    find_library();
    const char *mode = argv[1];
    if (!strcmp(mode, "libc")) libc_names();
    else if (!strcmp(mode, "mallinfo")) mallinfo_figures();
    else if (!strcmp(mode, "trim")) trim();
    else if (!strcmp(mode, "info")) info();
    else if (!strcmp(mode, "stats")) stats_report();
    else if (!strcmp(mode, "same")) same_as_glibc();
    else if (!strcmp(mode, "boot")) bootstrap_blocks();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (failures) return 1;
    fprintf(!strcmp(mode, "info") ? stderr : stdout, "all ok\n");
    return 0;
}
