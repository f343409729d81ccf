/* bench_next.h: what the benchmark interposers (bench_forwarder.c, bench_ideal.c) share: the
 * next allocator's functions, looked up with dlsym(RTLD_NEXT) on first use, and a bootstrap
 * buffer that serves dlsym's own allocations while they are being looked up. */
#ifndef BENCH_NEXT_H
#define BENCH_NEXT_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static char boot[65536];
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n) {
    void *p = boot + boot_used;
    boot_used += (n + 15) & ~(size_t)15;
    if (boot_used > sizeof boot) return NULL;
    memset(p, 0, n);
    return p;
}

static int is_boot(void *p) { return (char *)p >= boot && (char *)p < boot + sizeof boot; }

static void resolve(void) {
    if (resolving) return;
    resolving = 1;
    next_malloc = dlsym(RTLD_NEXT, "malloc");
    next_free = dlsym(RTLD_NEXT, "free");
    next_calloc = dlsym(RTLD_NEXT, "calloc");
    next_realloc = dlsym(RTLD_NEXT, "realloc");
    resolving = 0;
}
#endif
