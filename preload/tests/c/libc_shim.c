/* libc_shim: a small malloc wrapper of the kind people preload to count or log allocations.
 * Its malloc family counts each call in shim_calls and hands the call on, built with
 *   -DVIA_LIBC: to glibc's own names (__libc_malloc, __libc_free, ...);
 *   -DVIA_NEXT: to the next object's functions, found with dlsym(RTLD_NEXT, ...);
 *   -DOWN_HEAP: to nothing: it is a full allocator itself (a bump heap over mmap whose free
 *               keeps the block), as a preloaded allocator after libresizealloc.so would be.
 * Preloaded after libresizealloc.so, it is the library's next allocator; before it, the
 * program's first. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

_Atomic unsigned long shim_calls;

#if defined(VIA_LIBC)
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
#define NEXT_MALLOC __libc_malloc
#define NEXT_FREE __libc_free
#define NEXT_CALLOC __libc_calloc
#define NEXT_REALLOC __libc_realloc
#define NEXT_MEMALIGN __libc_memalign
#elif defined(VIA_NEXT)
static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void *(*next_memalign)(size_t, size_t);
/* dlsym may call calloc before the lookups are done: a few static bytes serve it. */
static char early[4096] __attribute__((aligned(16)));
static size_t early_used;
static int is_early(void *p) { return (char *)p >= early && (char *)p < early + sizeof early; }
static void *early_alloc(size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (early_used + n > sizeof early) return NULL;
    void *p = early + early_used;
    early_used += n;
    return p;
}
static int resolving;
static void resolve(void) {
    if (next_malloc || resolving) return;
    resolving = 1;
    next_calloc = dlsym(RTLD_NEXT, "calloc");
    next_free = dlsym(RTLD_NEXT, "free");
    next_realloc = dlsym(RTLD_NEXT, "realloc");
    next_memalign = dlsym(RTLD_NEXT, "memalign");
    next_malloc = dlsym(RTLD_NEXT, "malloc");
    resolving = 0;
}
static void *NEXT_MALLOC(size_t n) { resolve(); return next_malloc ? next_malloc(n) : early_alloc(n); }
static void NEXT_FREE(void *p) { if (is_early(p)) return; resolve(); if (next_free) next_free(p); }
static void *NEXT_CALLOC(size_t a, size_t b) {
    resolve();
    return next_calloc ? next_calloc(a, b) : early_alloc(a * b); /* early: static, zero */
}
static void *NEXT_REALLOC(void *p, size_t n) {
    resolve();
    if (is_early(p)) {
        void *q = next_malloc(n);
        if (q) memcpy(q, p, n < 64 ? n : 64);
        return q;
    }
    return next_realloc(p, n);
}
static void *NEXT_MEMALIGN(size_t a, size_t n) { resolve(); return next_memalign(a, n); }
#elif defined(OWN_HEAP)
/* A bump heap: 1 GiB of address space, a 16-byte header with the size before each block. */
static _Atomic uintptr_t heap_next, heap_end;
static void *bump(size_t align, size_t n) {
    if (!heap_end) {
        void *m = mmap(NULL, (size_t)1 << 30, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        uintptr_t expected = 0;
        if (atomic_compare_exchange_strong(&heap_end, &expected, (uintptr_t)m + ((size_t)1 << 30)))
            heap_next = (uintptr_t)m;
        else
            munmap(m, (size_t)1 << 30);
        while (!heap_next) {}
    }
    if (align < 16) align = 16;
    for (;;) {
        uintptr_t cur = heap_next;
        uintptr_t p = (cur + 16 + align - 1) & ~(uintptr_t)(align - 1);
        uintptr_t end = p + ((n + 15) & ~(size_t)15);
        if (end > heap_end) { errno = ENOMEM; return NULL; }
        if (atomic_compare_exchange_weak(&heap_next, &cur, end)) {
            ((size_t *)p)[-1] = n;
            return (void *)p;
        }
    }
}
static void *NEXT_MALLOC(size_t n) { return bump(16, n); }
static void NEXT_FREE(void *p) { (void)p; }
static void *NEXT_CALLOC(size_t a, size_t b) { return bump(16, a * b); } /* fresh: zero */
static void *NEXT_REALLOC(void *p, size_t n) {
    void *q = bump(16, n);
    if (q && p) {
        size_t old = ((size_t *)p)[-1];
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}
static void *NEXT_MEMALIGN(size_t a, size_t n) { return bump(a, n); }
size_t malloc_usable_size(void *p) { return p ? ((size_t *)p)[-1] : 0; }
#else
#error "build with -DVIA_LIBC, -DVIA_NEXT or -DOWN_HEAP"
#endif

void *malloc(size_t n) { shim_calls++; return NEXT_MALLOC(n); }
void free(void *p) { shim_calls++; NEXT_FREE(p); }
void *calloc(size_t a, size_t b) { shim_calls++; return NEXT_CALLOC(a, b); }
void *realloc(void *p, size_t n) { shim_calls++; return NEXT_REALLOC(p, n); }
void *memalign(size_t a, size_t n) { shim_calls++; return NEXT_MEMALIGN(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    shim_calls++;
    void *p = NEXT_MEMALIGN(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void *aligned_alloc(size_t a, size_t n) { shim_calls++; return NEXT_MEMALIGN(a, n); }
