/* A buffer grown a little at a time while other blocks land behind it (a string appended to
 * between allocations): realloc must move it, and each move gives it half as much again, so it
 * moves a logarithmic number of times. A move per growth copied up to 4 MiB sixteen thousand
 * times (3 s to minutes in process mode, glibc 21 ms). Contents checked after every move;
 * slack kept over shrinks of less than half; a shrink below half still shrinks. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)

static int intact(const char *p, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (p[k] != (char)('a' + k % 23)) return 0;
    return 1;
}

int main(void) {
    for (int round = 0; round < 2; round++) { /* round 1: inside a region */
        if (round) resize_region_begin();
        size_t n = 16;
        char *p = malloc(n);
        CHECK(p, "malloc");
        for (size_t k = 0; k < n; k++) p[k] = (char)('a' + k % 23);
        void *junk[64] = {0};
        int moves = 0, j = 0;
        while (n < (2u << 20)) {
            char *q = realloc(p, n + 16);
            CHECK(q, "realloc");
            if (q != p) {
                moves++;
                CHECK(intact(q, n), "contents moved intact");
            }
            p = q;
            for (size_t k = n; k < n + 16; k++) p[k] = (char)('a' + k % 23);
            n += 16;
            if ((n & 255) == 0) {
                free(junk[j & 63]);
                junk[j & 63] = malloc(32 + (j & 127));
                j++;
            }
        }
        CHECK(intact(p, n), "contents at the end");
        printf("round %d: %d moves for %zu growths\n", round, moves, n / 16);
        CHECK(moves < 64, "a logarithmic number of moves");
        /* A shrink to less than half gives memory back (the block may stay or move). */
        size_t usable = malloc_usable_size(p);
        char *s = realloc(p, usable / 4);
        CHECK(s && intact(s, usable / 4 < n ? usable / 4 : n), "shrink keeps the prefix");
        CHECK(malloc_usable_size(s) < usable / 2, "a shrink below half shrinks");
        free(s);
        for (int i = 0; i < 64; i++) free(junk[i]);
        if (round) CHECK(resize_region_end() == 0, "region end");
    }
    puts("realloc_append: all ok");
    return 0;
}
