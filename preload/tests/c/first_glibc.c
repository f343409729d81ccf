#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* The main thread allocates only in its arena (process mode, nothing under
 * RESIZEALLOC_MIN_SIZE), so glibc's malloc is first reached by worker threads, all at once.
 * glibc counts whoever initialises it as the main thread: exiting workers must not detach its
 * main arena from threads still using it. */
static pthread_barrier_t go;
static void *worker(void *arg) {
    pthread_barrier_wait(&go);
    for (int i = 0; i < 2000; i++) { void *p = malloc(24); memset(p, 1, 24); free(p); }
    return arg;
}
int main(void) {
    enum { N = 4 };
    pthread_t t[N];
    pthread_barrier_init(&go, 0, N);
    for (long i = 0; i < N; i++) pthread_create(&t[i], 0, worker, (void *)i);
    for (int i = 0; i < N; i++) pthread_join(t[i], 0);
    write(1, "all ok\n", 7);
    return 0;
}
