/* bench_ideal.c: the physical limit of a region allocator behind malloc. An LD_PRELOAD library
 * whose malloc inside a region bumps a thread-local pointer (initial-exec TLS), whose free does
 * nothing for its own blocks, and whose resize_region_end rolls the pointer back; everything
 * outside regions goes to the next allocator (glibc). It is unsound on purpose (Bumper.jl's
 * semantics: a block that escapes its region is overwritten by the next one) and still pays
 * every cost of interposition: the PLT call, the TLS load, and the range check in free. No sound
 * allocator behind malloc can be faster on the same program. scripts/bench.sh runs it as the
 * "ideal" column.
 *
 * Two builds add, one at a time, what a sound allocator with block headers must do on top, to
 * show what each costs (scripts/matrix.sh with IDEAL_PARTS=1). Still unsound: nothing is reused
 * before the region end.
 *   -DHDR=1   a 16-byte header per block: a word with its size and a live tag written by
 *             malloc, read and checked by free (a trap unless live), which writes a freed tag.
 *   -DLINK=1  (with HDR) the header's second word names the block below it: the chain by which
 *             a LIFO free finds the new last block (the library's `below_top` and link). Its
 *             cost is the load and store of the chain's head on every allocation.
 *
 * Build: gcc -O2 -shared -fPIC -ftls-model=initial-exec -o libideal.so bench_ideal.c -ldl */
#include "bench_next.h" /* first: it defines _GNU_SOURCE */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define SLICE ((uintptr_t)256 << 20) /* address space per thread */
#define SLICES 32
static char *space;                /* SLICES * SLICE bytes reserved at the first region */
static unsigned slices_used;

static __thread char *cur __attribute__((tls_model("initial-exec")));
static __thread char *lim __attribute__((tls_model("initial-exec")));
static __thread char *base __attribute__((tls_model("initial-exec")));
static __thread int depth __attribute__((tls_model("initial-exec")));
#ifndef HDR
#define HDR 0
#endif
#ifndef LINK
#define LINK 0
#endif
#if LINK && !HDR
#error "LINK=1 needs HDR=1: the link is the header's second word"
#endif
#define HEADER (HDR ? 16 : 0)
static __thread char *last __attribute__((tls_model("initial-exec"))); /* chain head (LINK) */


static inline int ours(void *p) { return (uintptr_t)p - (uintptr_t)space < SLICES * SLICE; }

void resize_region_begin(void) {
    if (depth++ == 0 && !base) {
        if (!__atomic_load_n(&space, __ATOMIC_ACQUIRE)) {
            char *s = mmap(NULL, SLICES * SLICE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            char *expected = NULL;
            if (s == MAP_FAILED || !__atomic_compare_exchange_n(&space, &expected, s, 0,
                                                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                if (s != MAP_FAILED) munmap(s, SLICES * SLICE);
        }
        unsigned i = __atomic_fetch_add(&slices_used, 1, __ATOMIC_RELAXED);
        /* `lim` keeps room for a header, and malloc's test is strict (`n < lim - cur`), so that
         * a thread without a slice (cur == lim == NULL) bumps nothing, not even for malloc(0). */
        if (space && i < SLICES) { base = cur = space + i * SLICE; lim = base + SLICE - HEADER; }
    }
}

int resize_region_end(void) {
    if (depth == 0) return -1;
    if (--depth == 0) cur = base;
    return 0;
}

/* The block of n bytes at the bump pointer (the caller checked that it fits). */
static inline void *bump(char *p, size_t n) {
    cur = p + HEADER + ((n + 15) & ~(size_t)15);
#if HDR
    ((size_t *)p)[0] = n << 16 | 1; /* size and the live tag */
#if LINK
    ((char **)p)[1] = last;
    last = p;
#endif
#endif
    return p + HEADER;
}

void *malloc(size_t n) {
    char *p = cur;
    if (depth && n < (size_t)(lim - p)) return bump(p, n);
    if (__builtin_expect(!next_malloc, 0)) { resolve(); if (!next_malloc) return boot_alloc(n); }
    return next_malloc(n);
}

void *calloc(size_t a, size_t b) {
    size_t n;
    if (depth && !__builtin_mul_overflow(a, b, &n)) {
        char *p = cur;
        if (n < (size_t)(lim - p)) return memset(bump(p, n), 0, n);
    }
    if (__builtin_expect(!next_calloc, 0)) { resolve(); if (!next_calloc) return boot_alloc(a * b); }
    return next_calloc(a, b);
}

void free(void *p) {
    if (ours(p)) {
#if HDR
        unsigned short *tag = (unsigned short *)((char *)p - HEADER);
        if (*tag != 1) __builtin_trap(); /* not a live block */
        *tag = 2;
#endif
        return;
    }
    if (is_boot(p)) return;
    if (__builtin_expect(!next_free, 0)) resolve();
    next_free(p);
}

void *realloc(void *p, size_t n) {
    if (p && ours(p)) { /* the old size is unknown: copy what can be read */
        char *q = malloc(n);
        char *end = space + SLICES * SLICE;
        if (q) memcpy(q, p, n < (size_t)(end - (char *)p) ? n : (size_t)(end - (char *)p));
        return q;
    }
    if (__builtin_expect(!next_realloc, 0)) resolve();
    return next_realloc(p, n);
}
