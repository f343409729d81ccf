/*
 * memcpy_alias.c: memcpy time by the distance between destination and source modulo 4 KiB.
 *
 *   gcc -O2 -o memcpy_alias scripts/memcpy_alias.c && ./memcpy_alias [bytes...]
 *
 * Why the arena starts blocks of a page or more on a 64-byte line (src/layout.rs, block_align):
 * two blocks bumped one after the other with 16-byte headers lie exactly 16 bytes apart modulo
 * 4 KiB when the first one's size is a multiple of a page, and glibc's memcpy (rep movsb) is
 * many times slower at that distance (4K aliasing between its loads and stores). Prints one line
 * per size: microseconds per copy at each distance 0, 16, ..., 320.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t sizes[16] = {4096, 16384, 65536};
    int n = 3;
    if (argc > 1) {
        n = 0;
        for (int i = 1; i < argc && n < 16; i++) sizes[n++] = (size_t)atol(argv[i]);
    }
    char *buf = aligned_alloc(4096, 1 << 24);
    if (!buf) return 1;
    memset(buf, 1, 1 << 24);
    for (int k = 0; k < n; k++) {
        size_t len = sizes[k];
        if (len == 0 || len > (1 << 22)) continue;
        printf("%zu bytes:", len);
        for (int off = 0; off <= 320; off += 16) {
            char *src = buf + 0x10, *dst = buf + (1 << 23) + 0x10 + off;
            long reps = 200000000L / (long)len + 1;
            double t = now();
            for (long i = 0; i < reps; i++) {
                memcpy(dst, src, len);
                __asm__ volatile("" ::: "memory");
            }
            printf(" %d:%.2f", off, (now() - t) / (double)reps * 1e6);
        }
        printf("\n");
    }
    return 0;
}
