/* corruption.h: what the heap-corruption programs of this folder share. Each program does one
 * wrong thing with the heap. A program the allocator catches dies (an abort with a message, or
 * a fault where the memory is gone); one it does not catch prints "not caught" and exits 0.
 * A program whose right answer is a value (NULL for an impossible size, no old data in freed
 * memory) prints "caught" when it gets it.
 *
 * Every program runs inside a region when libresizealloc.so is loaded (begun here through
 * dlsym; in process mode the thread is in one already), so that the arena serves it. */
#ifndef RESIZEALLOC_CORRUPTION_H
#define RESIZEALLOC_CORRUPTION_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Kept opaque to the compiler, so that no wrong access is optimised away. */
static void *volatile sink;
__attribute__((unused)) static void *launder(void *p) { sink = p; return sink; }

__attribute__((unused)) static void enter_region(void) {
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    if (begin) begin();
}

/* A block with allocations before and after it, so that it has neighbours. */
__attribute__((unused)) static unsigned char *block_between(size_t n) {
    launder(malloc(n));
    unsigned char *p = launder(malloc(n));
    launder(malloc(n));
    memset(p, 'a', n);
    return p;
}

/* The newest block, with the block before it freed already: in a region, the last live block
 * of the arena's uncounted range, and not its first. */
__attribute__((unused)) static unsigned char *last_above_freed(size_t n) {
    free(launder(malloc(n))); /* a fresh arena's first block takes its slow path */
    unsigned char *older = launder(malloc(n));
    unsigned char *p = launder(malloc(n));
    memset(p, 'a', n);
    free(older);
    return p;
}

__attribute__((unused)) static int not_caught(void) {
    puts("not caught");
    fflush(stdout);
    return 0;
}
__attribute__((unused)) static int caught(void) {
    puts("caught");
    fflush(stdout);
    return 0;
}

#define SMALL 48
#define LARGE (256 << 10)
#endif
