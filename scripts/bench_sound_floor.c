/* bench_sound_floor.c: the leanest *sound* region allocator behind malloc we could write, as a
 * measuring stick beside bench_ideal.c. The ideal is unsound on purpose: its free does nothing,
 * so a block freed out of order, or one that escapes its region, is overwritten by the next one.
 * This one keeps the guarantees a sound allocator cannot drop, and only those, in the cheapest
 * form we know:
 *
 *   - a freed block is reused, in a region, once it and every block above it are freed (LIFO and
 *     FIFO frees take the bump pointer back), so a loop does not walk through memory;
 *   - a block that is still live is never reused: an escaped block keeps its memory and all
 *     that lies below it (no reclaim, no memory bound);
 *   - a double free or a free of a pointer it never handed out is refused (abort), never taken;
 *   - the high-water mark a resize needs is kept;
 *   - malloc(0) gets a block of its own.
 *
 * It has no block headers: each thread keeps an *object stack* beside its bump area, one word
 * per block (the block's address; bit 0 set once it is freed out of order). Entries are in
 * address order, so the last one is the block at the bump pointer, and a block's size is the
 * distance to the next entry. A free out of order searches the stack (cold); built with
 * -DHDR=16 ("soundhdr" in scripts/bench.sh), each block has a header word that names its entry
 * instead, and such a free is O(1). Built with -DMAP=1 ("soundmap" in scripts/matrix.sh), it
 * keeps a block's state in a byte map beside the bump area instead (a byte per 16 bytes: 1 a
 * live block starts here, 2 a block freed out of order): a free out of order is O(1) and reads
 * and writes only the map, never the block's own cache line. What it leaves out, and a real
 * allocator must pay for on top:
 * frees from other threads (they are refused here: abort), escaped blocks' reclaim and its
 * memory bound, realloc in place, statistics, process mode, spills past the slice, options,
 * aligned allocation (memalign, posix_memalign and aligned_alloc go to the next allocator) and
 * malloc_usable_size (not exported: on one of its blocks the next allocator's would read a
 * header that is not there). It is a floor for the in-region pair, not an allocator to ship.
 *
 * Build: gcc -O2 -shared -fPIC [-DHDR=16] -o libsoundfloor.so bench_sound_floor.c -ldl */
#include "bench_next.h" /* first: it defines _GNU_SOURCE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLICE ((uintptr_t)256 << 20) /* bump area per thread */
#define STACK (SLICE / 16 * 8 + 64)  /* one word per 16 bytes of bump area, and a sentinel */
#define SLICES 32
/* Block headers: 0 (the default), or 16 with -DHDR=16: a word in front of each block names its
 * object stack entry, so that a free out of order is O(1) (without them it is a binary search
 * of the stack, cold: the leanest design when nearly every free is LIFO or FIFO, as in the
 * bumper and lifo workloads; with them, the leanest we know when frees come in any order, as
 * in mixed). */
#ifndef HDR
#define HDR 0
#endif
#ifndef MAP
#define MAP 0
#endif
#if HDR && MAP
#error "HDR and MAP are two designs: build with one of them"
#endif
#define MAPLEN (SLICE / 16) /* one byte per 16 bytes of bump area */
/* SLICES * SLICE bytes of bump areas. Until they are reserved, `space` is the highest range of
 * that size, which no user pointer (and not NULL) falls in, so that `ours` needs no other test. */
#define UNRESERVED ((char *)(uintptr_t)0 - SLICES * SLICE)
static char *space = UNRESERVED;
static char *stacks;  /* SLICES * STACK bytes of object stacks */
static unsigned char *maps; /* SLICES * MAPLEN bytes of block-state maps (MAP builds) */
static unsigned slices_used;

/* One thread's state, in one initial-exec TLS block so that a path finds it with one GOT load.
 * (The ideal keeps its three words as separate TLS variables: one GOT load each.) */
struct thread_state {
    char *cur;            /* bump pointer */
    char *lim;            /* end of the slice */
    uintptr_t *sp;        /* next entry of the object stack */
    char *peak;           /* highest `cur` seen: the high-water mark a resize needs */
    uintptr_t *sp_base;   /* first entry; sp_base[-1] stays 0 (a sentinel for free) */
    char *base;           /* start of the slice */
    unsigned char *map;   /* its block-state map (MAP builds) */
    int depth;            /* region nesting */
};
/* Before a thread's first region its stack pointer points past this 0 word, so that free's test
 * of the last entry needs no null test: it never matches a pointer of ours. */
static const uintptr_t no_stack[2];
static __thread struct thread_state T __attribute__((tls_model("initial-exec"))) = {
    .sp = (uintptr_t *)&no_stack[1],
};
#define cur T.cur
#define lim T.lim
#define sp T.sp
#define peak T.peak
#define sp_base T.sp_base
#define base T.base
#define map T.map
/* The map byte of the block at `p` (MAP builds). */
#define STATE(p) map[((uintptr_t)(p) - (uintptr_t)base) >> 4]
#define depth T.depth

static inline int ours(void *p) { return (uintptr_t)p - (uintptr_t)space < SLICES * SLICE; }

static void refuse(const char *what, void *p) {
    char msg[96];
    int n = snprintf(msg, sizeof msg, "sound floor: %s %p\n", what, p);
    if (n > 0) (void)!write(2, msg, (size_t)n);
    abort();
}

static void *reserve(size_t len) {
    char *s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return s == MAP_FAILED ? NULL : s;
}

/* 0: not reserved, 1: being reserved, 2: reserved (or failed: `space` stays UNRESERVED). */
static int reserved;

static void reserve_once(void) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&reserved, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        char *s = reserve(SLICES * SLICE), *t = reserve(SLICES * STACK);
        unsigned char *m = MAP ? reserve(SLICES * MAPLEN) : (unsigned char *)1;
        if (s && t && m) { stacks = t; space = s; maps = m; }
        __atomic_store_n(&reserved, 2, __ATOMIC_RELEASE);
    }
    while (__atomic_load_n(&reserved, __ATOMIC_ACQUIRE) != 2) sched_yield();
}

void resize_region_begin(void) {
    if (depth++ == 0 && !base) {
        reserve_once();
        unsigned i = __atomic_fetch_add(&slices_used, 1, __ATOMIC_RELAXED);
        if (space != UNRESERVED && i < SLICES) {
            base = cur = peak = space + i * SLICE;
            lim = base + SLICE - HDR; /* so that `n <= lim - cur` leaves room for a header */
            sp_base = sp = (uintptr_t *)(stacks + i * STACK) + 2; /* sp_base[-1] stays 0 */
            if (MAP) map = maps + (size_t)i * MAPLEN;
        }
    }
}

/* The outermost end. The top entry is always live (free pops a freed top block and every marked
 * entry below it), so there is nothing to take back here: when every block was freed, the frees
 * took the bump pointer back to the slice's start already, and a live block (an escape) keeps
 * its memory and what lies below it. Only the high-water mark is taken. */
int resize_region_end(void) {
    if (depth == 0) return -1;
    if (--depth == 0 && base && cur > peak) peak = cur;
    return 0;
}

/* Under a region: n <= lim - cur, n >= 1 (malloc(0) takes the next allocator). */
static inline void *bump(size_t n) {
    char *p = cur + HDR;
    uintptr_t *s = sp;
    *s = (uintptr_t)p;
    sp = s + 1;
#if HDR
    ((uintptr_t **)p)[-1] = s; /* the header: the block's entry */
#endif
#if MAP
    STATE(p) = 1;
#endif
    cur = p + ((n + 15) & ~(size_t)15);
    return p;
}

void *malloc(size_t n) {
    if (depth && n - 1 < (size_t)(lim - cur)) return bump(n);
    if (__builtin_expect(!next_malloc, 0)) { resolve(); if (!next_malloc) return boot_alloc(n); }
    return next_malloc(n);
}

void *calloc(size_t a, size_t b) {
    size_t n;
    if (depth && !__builtin_mul_overflow(a, b, &n) && n - 1 < (size_t)(lim - cur))
        return memset(bump(n), 0, n);
    if (__builtin_expect(!next_calloc, 0)) { resolve(); if (!next_calloc) return boot_alloc(a * b); }
    return next_calloc(a, b);
}

/* The entry of a live block `p` of this thread, or NULL: a binary search of the object stack. */
static uintptr_t *entry_of(void *p) {
    uintptr_t *lo = sp_base, *hi = sp, x = (uintptr_t)p;
    if (!lo) return NULL; /* no region yet: `sp` is `no_stack` */
    while (lo < hi) {
        uintptr_t *mid = lo + (hi - lo) / 2;
        if ((*mid & ~(uintptr_t)1) < x) lo = mid + 1;
        else hi = mid;
    }
    return (lo < sp && (*lo & ~(uintptr_t)1) == x) ? lo : NULL;
}

/* A free that is not at the bump pointer: mark the block freed (or refuse the free). */
__attribute__((noinline, cold)) static void free_below(void *p) {
    uintptr_t *e = entry_of(p);
    if (!e) refuse("free of a pointer that is not a live block of this thread:", p);
    if (*e & 1) refuse("double free:", p);
    *e |= 1;
}

/* The block at the bump pointer was freed: go on down over blocks freed out of order. */
__attribute__((noinline, cold)) static void pop_freed(void) {
    uintptr_t *s = sp;
#if MAP
    while (s > sp_base && STATE(s[-1]) == 2) STATE(*--s) = 0;
#else
    while (s[-1] & 1) s--; /* sp_base[-1] is 0: the loop stops there */
#endif
    sp = s;
    cur = (char *)(s[0] & ~(uintptr_t)1) - HDR;
}

void free(void *p) {
    if (ours(p)) {
        uintptr_t *s = sp;
        if ((uintptr_t)p == s[-1]) { /* the block at the bump pointer, live */
            if (cur > peak) peak = cur;
            cur = (char *)p - HDR;
            sp = s - 1;
#if MAP
            /* No stale "live" byte may stay behind the bump pointer. */
            STATE(p) = 0;
            if (s - 2 >= sp_base && STATE(s[-2]) == 2) pop_freed();
#else
            if (s[-2] & 1) pop_freed();
#endif
            return;
        }
#if MAP
        /* Its map byte says whether a live block of this thread starts at `p`: 1, and the free
         * makes it 2; anything else (a double free, no block's start, another thread's block)
         * is refused. */
        if (((uintptr_t)p & 15) == 0 && (uintptr_t)p - (uintptr_t)base < (uintptr_t)(cur - base)
            && STATE(p) == 1) {
            STATE(p) = 2;
            return;
        }
        refuse("free of a pointer that is not a live block of this thread:", p);
#endif
#if HDR
        /* Its header names its entry: a live block of this thread iff the entry is one of
         * this thread's and names it unmarked (a double free finds it marked). */
        uintptr_t *e = ((uintptr_t **)p)[-1];
        if (sp_base && (uintptr_t)e - (uintptr_t)sp_base < (uintptr_t)s - (uintptr_t)sp_base
            && *e == (uintptr_t)p) {
            *e = (uintptr_t)p | 1;
            return;
        }
#endif
        free_below(p); /* refuses, or (no headers) searches the object stack */
        return;
    }
    if (is_boot(p)) return;
    if (__builtin_expect(!next_free, 0)) resolve();
    next_free(p);
}

void *realloc(void *p, size_t n) {
    if (p && ours(p)) {
        uintptr_t *e = entry_of(p);
        if (!e || (MAP ? STATE(p) != 1 : (*e & 1)))
            refuse("realloc of a pointer that is not a live block of this thread:", p);
        size_t old = (size_t)((e + 1 < sp ? (char *)(e[1] & ~(uintptr_t)1) : cur) - (char *)p);
        char *q = malloc(n);
        if (q) {
            memcpy(q, p, n < old ? n : old);
            free(p);
        }
        return q;
    }
    if (__builtin_expect(!next_realloc, 0)) resolve();
    return next_realloc(p, n);
}
