/* warm_at_start.c: preloaded beside libresizealloc.so in process mode, allocates and frees one
 * small block on the main thread before main. In process mode a thread's first small request
 * goes to the next allocator (glibc), its later ones to the small-block heap; a program that
 * allocates one block, as each of mimalloc-bench's security programs does, then hands glibc's
 * checks its misuse rather than the library's. With this, the program's own blocks come from
 * the library, and scripts/security.sh's "process, warmed" column (WARMED=1) shows what its
 * checks make of them.
 *
 *   cc -O2 -shared -fPIC scripts/warm_at_start.c -o warm_at_start.so
 *   LD_PRELOAD="$PWD/warm_at_start.so $PWD/target/release/libresizealloc.so" RESIZEALLOC_REGION=process ./program */
#include <stdlib.h>

__attribute__((constructor)) static void warm_at_start(void) {
    void *volatile p = malloc(1);
    free(p);
}
