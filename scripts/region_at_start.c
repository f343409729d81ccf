/* region_at_start.c: preloaded beside libresizealloc.so, begins a region on the main thread
 * before main, so that a program with no region markers of its own runs in markers mode inside
 * one region (never ended: the program exits inside it), as if main began with
 * resize_region_begin(). scripts/security.sh runs mimalloc-bench's programs so in its markers
 * column.
 *
 *   cc -O2 -shared -fPIC scripts/region_at_start.c -o region_at_start.so
 *   LD_PRELOAD="$PWD/region_at_start.so $PWD/target/release/libresizealloc.so" ./program
 *
 * Without the library loaded there is no region to begin: it says so and exits 125, rather
 * than letting the program run on the next allocator as if in a region. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void region_at_start(void) {
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    if (!begin) {
        static const char msg[] = "region_at_start: resize_region_begin not found "
                                  "(libresizealloc.so is not loaded)\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(125);
    }
    begin();
}
