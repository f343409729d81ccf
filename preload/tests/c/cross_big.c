/* One thread allocates large blocks (16 x 32 MiB) and hands each to another thread, which frees
 * it; each block is made while the last is still live, and written (every page) once the other
 * thread freed that one. Peak RSS must stay near one block, as glibc's (which unmaps them): 34
 * MiB; contents are checked. (The freeing thread gives a large block's pages back at once. The
 * probe that found the old library's 66-98 MiB let the threads race; this handshake keeps the
 * test deterministic, and the old library passes it too.) Run in both modes; the allocating
 * thread works inside regions. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"
#include "rss.h"

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)
#define BLOCK (32u << 20)
#define COUNT 16

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned char *slot;
static int done;
static pthread_mutex_t freed_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t freed_cv = PTHREAD_COND_INITIALIZER;
static int freed; /* blocks the other thread has freed */

static void *freer(void *arg) {
    (void)arg;
    for (int k = 0; k < COUNT; k++) {
        pthread_mutex_lock(&mu);
        while (!slot) pthread_cond_wait(&cv, &mu);
        unsigned char *p = slot;
        slot = NULL;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        for (size_t at = 0; at < BLOCK; at += 1u << 20) CHECK(p[at] == (unsigned char)(k + at / 4096), "contents");
        free(p);
        pthread_mutex_lock(&freed_mu);
        freed++;
        pthread_cond_signal(&freed_cv);
        pthread_mutex_unlock(&freed_mu);
    }
    pthread_mutex_lock(&mu);
    done = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, freer, NULL) == 0, "pthread_create");
    for (int k = 0; k < COUNT; k++) {
        resize_region_begin();
        /* Made while the last block is still live, written once the other thread freed it. */
        unsigned char *p = malloc(BLOCK);
        CHECK(p, "malloc");
        pthread_mutex_lock(&freed_mu);
        while (freed < k) pthread_cond_wait(&freed_cv, &freed_mu);
        pthread_mutex_unlock(&freed_mu);
        for (size_t at = 0; at < BLOCK; at += 4096) p[at] = (unsigned char)(k + at / 4096);
        resize_region_end();
        pthread_mutex_lock(&mu);
        slot = p;
        pthread_cond_signal(&cv);
        while (slot) pthread_cond_wait(&cv, &mu); /* taken */
        pthread_mutex_unlock(&mu);
    }
    pthread_mutex_lock(&mu);
    while (!done) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    long hwm = status_kib("VmHWM:");
    printf("peak RSS %ld KiB\n", hwm);
    /* One block at a time, plus the process: glibc 34 MiB. */
    CHECK(hwm > 0 && hwm < 56 * 1024, "peak RSS near one large block");
    puts("cross_big: all ok");
    return 0;
}
