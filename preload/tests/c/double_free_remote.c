/* A block freed by another thread and then by its owner (a double free) must abort like glibc,
 * also when it is the region's last block, which the owner's LIFO free releases without reading
 * its tag (the remote free poisons its link instead). The first block of a region may take the
 * slow path, so the block freed twice is the second: the fast path handed it out. The other
 * thread starts before the region (pthread_create allocates), and nothing is allocated between
 * that block and its two frees. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

static _Atomic(void *) shared;
static atomic_int done;

static void *free_it(void *arg) {
    (void)arg;
    void *p;
    while (!(p = atomic_load(&shared))) {
    }
    free(p);
    atomic_store(&done, 1);
    return NULL;
}

int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, free_it, NULL) != 0) return 2;
    resize_region_begin();
    char *first = malloc(100);
    char *p = malloc(100);
    memset(first, 1, 100);
    memset(p, 1, 100);
    atomic_store(&shared, p);
    while (!atomic_load(&done)) {
    }
    free(p);
    return 0; /* not reached */
}
