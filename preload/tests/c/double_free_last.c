/* A double free of the last block a region handed out: the first free is the inline LIFO free
 * of free's entry point, which must leave the tag saying "freed" for the second to be caught
 * (double_free.c frees the region's only block, which the slow path served). */
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

int main(void) {
    for (int i = 0; i < 3; i++) { /* a warm arena: the blocks below come from the fast paths */
        resize_region_begin();
        char *w = malloc(1000);
        memset(w, 1, 1000);
        free(w);
        resize_region_end();
    }
    resize_region_begin();
    char *a = malloc(100), *b = malloc(100);
    memset(a, 2, 100);
    memset(b, 3, 100);
    free(b);
    free(b);
    return 0; /* not reached */
}
