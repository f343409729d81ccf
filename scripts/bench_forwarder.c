/* bench_forwarder.c: the smallest possible LD_PRELOAD malloc interposer, one that only forwards
 * malloc/calloc/realloc/free to the next allocator. scripts/bench.sh runs it as the "forwarder"
 * column: the cost any interposer pays before doing anything, the floor for resizealloc's
 * outside-region overhead. */
#include "bench_next.h" /* first: it defines _GNU_SOURCE */
#include <stddef.h>
#include <string.h>


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
    if (is_boot(p)) return;
    if (__builtin_expect(!next_free, 0)) resolve();
    next_free(p);
}
