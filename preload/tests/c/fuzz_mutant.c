/* fuzz_mutant.c: a deliberately broken allocator, to show that the fuzzer (fuzz.c) notices a
 * lost byte. Preloaded over glibc, its realloc copies one byte less than it should once in
 * every 200 growths of a block of more than 16 bytes; everything else is glibc's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);

static atomic_ulong growths;

void *realloc(void *p, size_t n) {
    if (!p) return __libc_malloc(n);
    size_t old = malloc_usable_size(p);
    if (n <= old || old <= 16 || atomic_fetch_add(&growths, 1) % 200 != 199) return __libc_realloc(p, n);
    void *q = __libc_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, old);
    ((unsigned char *)q)[0] ^= 1; /* the bug: the first byte changes on the way */
    __libc_free(p);
    return q;
}
