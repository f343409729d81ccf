/* Under RLIMIT_AS (set by the test), the arenas' reservation takes at most an eighth of the
 * limit: a large malloc outside regions still succeeds, and regions still get an arena. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

#define FAIL(msg) do { fprintf(stderr, "FAIL: %s\n", msg); return 1; } while (0)

int main(void) {
    /* Inside a region: the arena exists (process mode: every thread is in one; blocks over
     * 1 KiB, as process mode sends smaller ones to the small-block heap). */
    resize_region_begin();
    void *small[100];
    for (int i = 0; i < 100; i++) { small[i] = malloc(2000); memset(small[i], i, 2000); }
    struct resize_stats s;
    resize_stats_get(&s, sizeof s);
    if (s.thread.region_allocs < 100) FAIL("regions got no arena under RLIMIT_AS");
    for (int i = 0; i < 100; i++) free(small[i]);
    resize_region_end();
    /* 60% of the 1 GiB limit, outside regions (process mode: too big for the arena's slot). */
    size_t big = (size_t)600 << 20;
    char *p = malloc(big);
    if (!p) FAIL("malloc of 600 MiB failed: the reservation took the address space");
    memset(p, 1, 4096);
    p[big - 1] = 2;
    free(p);
    if (s.process.reserved_bytes > ((size_t)1 << 30) / 8) FAIL("reservation above an eighth of RLIMIT_AS");
    printf("all ok (reserved %llu bytes)\n", (unsigned long long)s.process.reserved_bytes);
    return 0;
}
