/* bench_forwarder.c: the smallest possible LD_PRELOAD malloc interposer, one that only forwards
 * malloc/calloc/realloc/free to the next allocator. scripts/bench.sh runs it as the "forwarder"
 * column: the cost any interposer pays before doing anything, the floor for resizealloc's
 * outside-region overhead. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static char boot[65536]; /* serves dlsym's own allocations while we look the functions up */
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n) {
    void *p = boot + boot_used;
    boot_used += (n + 15) & ~(size_t)15;
    if (boot_used > sizeof boot) return NULL;
    memset(p, 0, n);
    return p;
}

static void resolve(void) {
    if (resolving) return;
    resolving = 1;
    next_malloc = dlsym(RTLD_NEXT, "malloc");
    next_free = dlsym(RTLD_NEXT, "free");
    next_calloc = dlsym(RTLD_NEXT, "calloc");
    next_realloc = dlsym(RTLD_NEXT, "realloc");
    resolving = 0;
}

void *malloc(size_t n) {
    if (__builtin_expect(!next_malloc, 0)) { resolve(); if (!next_malloc) return boot_alloc(n); }
    return next_malloc(n);
}

void *calloc(size_t a, size_t b) {
    if (__builtin_expect(!next_calloc, 0)) { resolve(); if (!next_calloc) return boot_alloc(a * b); }
    return next_calloc(a, b);
}

void *realloc(void *p, size_t n) {
    if (__builtin_expect(!next_realloc, 0)) resolve();
    return next_realloc(p, n);
}

void free(void *p) {
    if ((char *)p >= boot && (char *)p < boot + sizeof boot) return;
    if (__builtin_expect(!next_free, 0)) resolve();
    next_free(p);
}
