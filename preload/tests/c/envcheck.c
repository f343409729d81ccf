/* Prints what the environment made of the markers: region allocations for a marked region,
 * for unmarked code, and for a small and a large block. The small one is above the 1 KiB that
 * process mode sends to the small-block heap, whatever the site. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

static unsigned long long allocs(void) {
    struct resize_stats s;
    resize_stats_get(&s, sizeof s);
    return (unsigned long long)s.thread.region_allocs;
}

int main(void) {
    unsigned long long a0 = allocs();
    void *unmarked = malloc(2000);
    unsigned long long a1 = allocs();
    resize_region_begin();
    void *small = malloc(2000);
    unsigned long long a2 = allocs();
    void *large = malloc(1 << 20);
    unsigned long long a3 = allocs();
    memset(large, 1, 1 << 20);
    free(large);
    free(small);
    int end = resize_region_end();
    free(unmarked);
    printf("unmarked %llu small %llu large %llu end %d depth %d\n", a1 - a0, a2 - a1, a3 - a2, end, resize_region_depth());
    return 0;
}
