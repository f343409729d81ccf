/* With LD_PRELOAD="libresizealloc.so libmimalloc.so.2", allocations outside regions must come
 * from mimalloc and region allocations from the arena. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include "resizealloc.h"

int main(void) {
    bool (*in_heap)(const void *) = (bool (*)(const void *))dlsym(RTLD_DEFAULT, "mi_is_in_heap_region");
    if (!in_heap) { puts("FAIL mimalloc not loaded"); return 1; }
    void *outside = malloc(100);
    resize_region_begin();
    void *inside = malloc(100);
    struct resize_stats s;
    resize_stats_get(&s, sizeof s);
    resize_region_end();
    printf("outside in mimalloc heap: %d, inside in mimalloc heap: %d, region allocs: %llu\n",
           in_heap(outside), in_heap(inside), (unsigned long long)s.thread.region_allocs);
    if (!in_heap(outside) || in_heap(inside) || s.thread.region_allocs < 1) { puts("FAIL chain"); return 1; }
    free(inside);
    free(outside);
    puts("all ok");
    return 0;
}
