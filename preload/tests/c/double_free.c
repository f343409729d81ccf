/* A double free of an arena block must abort like glibc, with a message on stderr. */
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

int main(void) {
    resize_region_begin();
    char *p = malloc(100);
    memset(p, 1, 100);
    free(p);
    free(p);
    return 0; /* not reached */
}
