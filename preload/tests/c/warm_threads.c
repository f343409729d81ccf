/* Short-lived threads one after another, each a region with 8 MiB of 1 MiB temporaries (8 live
 * at once): a thread that starts after another exited takes its arena, warm within the purge
 * delay and planned for what its regions needed, and faults in a fraction of the pages the
 * first one did (getrusage RUSAGE_THREAD). The second thread may still fault: the first one
 * planned 64 KiB and gave its pages back in the middle of its region, as the bound asks. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "resizealloc.h"

#define THREADS 6

static long faults[THREADS];

static void *worker(void *arg) {
    long i = (long)arg;
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    resize_region_begin();
    char *ring[8];
    for (int k = 0; k < 8; k++) {
        ring[k] = malloc(1 << 20);
        memset(ring[k], (int)i, 1 << 20);
    }
    for (int k = 0; k < 8; k++) {
        if (ring[k][12345] != (char)i) {
            fprintf(stderr, "contents lost\n");
            exit(3);
        }
        free(ring[k]);
    }
    resize_region_end();
    getrusage(RUSAGE_THREAD, &after);
    faults[i] = after.ru_minflt - before.ru_minflt;
    return NULL;
}

int main(void) {
    for (long i = 0; i < THREADS; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, (void *)i) != 0) return 2;
        pthread_join(t, NULL);
    }
    printf("page faults per thread:");
    for (int i = 0; i < THREADS; i++) printf(" %ld", faults[i]);
    printf("\n");
    /* 8 MiB is 2,048 pages: the first thread faults them in; from the third on they reuse them. */
    for (int i = 2; i < THREADS; i++)
        if (faults[i] * 4 > faults[0]) {
            printf("thread %d faulted %ld pages, the first %ld: not warm\n", i, faults[i], faults[0]);
            return 1;
        }
    printf("all ok\n");
    return 0;
}
