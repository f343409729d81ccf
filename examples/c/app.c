/*
 * app.c: a complete program on the C API of libresizealloc.
 *
 * Each step builds a table of strings, sorts it and frees it: the temporaries of a request.
 * The step runs in a region, so its allocations bump from the thread's resize arena; after the
 * first step the arena has resized to the step's peak and later steps fit it.
 *
 * Against an installed library (scripts/install.sh PREFIX):
 *   cc -O2 app.c $(pkg-config --cflags --libs resizealloc) -Wl,-rpath,$(pkg-config --variable=libdir resizealloc) -o app
 * (with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig when PREFIX is not a system prefix).
 * The binary also runs unmodified under LD_PRELOAD of another build of the library: the
 * preloaded one has the same SONAME, so it is the one copy the program uses.
 */
#include <resizealloc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 200, ROWS = 2000 };

static int by_text(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One step: ROWS strings in a table, sorted; returns a checksum of the sorted order. */
static unsigned long step(unsigned seed) {
    char **rows = malloc(ROWS * sizeof *rows);
    if (!rows) return 0;
    for (int i = 0; i < ROWS; i++) {
        seed = seed * 1103515245u + 12345u;
        rows[i] = malloc(32);
        if (!rows[i]) return 0;
        snprintf(rows[i], 32, "row-%08x-%d", seed, i);
    }
    qsort(rows, ROWS, sizeof *rows, by_text);
    unsigned long sum = 0;
    for (int i = 0; i < ROWS; i++) {
        sum = sum * 31 + (unsigned char)rows[i][5] + (unsigned long)i;
        free(rows[i]);
    }
    free(rows);
    return sum;
}

int main(void) {
    unsigned long check = 0;
    for (int s = 0; s < STEPS; s++) {
        resize_region_begin();
        check += step((unsigned)s);
        if (resize_region_end() != 0) {
            fprintf(stderr, "app: region end without a begin\n");
            return 1;
        }
    }
    struct resize_stats st;
    if (resize_stats_get(&st, sizeof st) < 0) {
        fprintf(stderr, "app: resize_stats_get failed\n");
        return 1;
    }
    printf("resizealloc %s: %d steps, check %lu, %llu region allocations, arena capacity %llu bytes\n",
           resize_version(), STEPS, check, (unsigned long long)st.thread.region_allocs,
           (unsigned long long)st.thread.arena_capacity);
    return st.thread.region_allocs >= (unsigned long long)STEPS * ROWS ? 0 : 2;
}
