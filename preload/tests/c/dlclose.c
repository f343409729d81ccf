/* dlclose: the library opened with dlopen (no LD_PRELOAD), used in a region from a thread,
 * closed again; threads started afterwards must still start and exit cleanly. Before the
 * library was linked with -z nodelete, dlclose unmapped it while its pthread key destructor
 * stayed registered, and the next exiting thread jumped into unmapped code (SIGSEGV). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void (*region_begin)(void);
static int (*region_end)(void);
static int (*region_depth)(void);
static void *(*lib_malloc)(size_t);
static void (*lib_free)(void *);

static void *in_region(void *arg) {
    (void)arg;
    region_begin();
    if (region_depth() != 1) { printf("depth %d in the region\n", region_depth()); exit(1); }
    for (int i = 0; i < 100; i++) {
        size_t n = (size_t)(i + 1) * 1000;
        char *p = lib_malloc(n);
        if (!p) { printf("malloc(%zu) failed\n", n); exit(1); }
        memset(p, i, n);
        lib_free(p);
    }
    if (region_end() != 0) { printf("region_end failed\n"); exit(1); }
    return NULL;
}

static pthread_barrier_t closed;

/* Works in a region, then stays alive until the library is closed and exits after that. */
static void *outlives_the_library(void *arg) {
    in_region(arg);
    pthread_barrier_wait(&closed); /* main: region work done */
    pthread_barrier_wait(&closed); /* main: dlclose done */
    return NULL;
}

static void *plain(void *arg) {
    char *p = malloc(100 + (size_t)arg);
    memset(p, 1, 100);
    free(p);
    return arg;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: dlclose LIBRARY\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    region_begin = (void (*)(void))dlsym(h, "resize_region_begin");
    region_end = (int (*)(void))dlsym(h, "resize_region_end");
    region_depth = (int (*)(void))dlsym(h, "resize_region_depth");
    lib_malloc = (void *(*)(size_t))dlsym(h, "malloc");
    lib_free = (void (*)(void *))dlsym(h, "free");
    if (!region_begin || !region_end || !region_depth || !lib_malloc || !lib_free) {
        printf("missing symbols\n");
        return 1;
    }
    pthread_t t, late;
    pthread_create(&t, NULL, in_region, NULL);
    pthread_join(t, NULL);
    in_region(NULL); /* the main thread gets a thread state too */
    pthread_barrier_init(&closed, NULL, 2);
    pthread_create(&late, NULL, outlives_the_library, NULL);
    pthread_barrier_wait(&closed);
    if (dlclose(h) != 0) { printf("dlclose: %s\n", dlerror()); return 1; }
    pthread_barrier_wait(&closed);
    pthread_join(late, NULL);
    for (int round = 0; round < 4; round++) {
        pthread_t ts[4];
        for (long i = 0; i < 4; i++) pthread_create(&ts[i], NULL, plain, (void *)i);
        for (int i = 0; i < 4; i++) pthread_join(ts[i], NULL);
    }
    printf("all ok\n");
    return 0;
}
