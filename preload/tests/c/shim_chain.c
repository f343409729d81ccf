/* shim_chain: runs with libc_shim.so (a malloc wrapper that counts its calls in shim_calls)
 * preloaded beside libresizealloc.so, in either order. The malloc family works outside and
 * inside regions, in threads and in a forked child; with "lib-first" (the library ahead of the
 * shim, so the shim is its next allocator) and markers mode, the shim sees none of the
 * regions' own allocations; with RESIZEALLOC_REGION=off it sees every call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "resizealloc.h"

static int failed;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL " __VA_ARGS__); puts(""); failed = 1; } } while (0)

static void outside_work(unsigned seed) {
    char *p = malloc(100);
    CHECK(p, "malloc outside");
    memset(p, 1, 100);
    p = realloc(p, 5000 + seed % 7);
    CHECK(p && p[99] == 1, "realloc outside kept the bytes");
    unsigned char *z = calloc(100, 10);
    CHECK(z, "calloc outside");
    for (int i = 0; z && i < 1000; i++) CHECK(z[i] == 0, "calloc outside is zero");
    void *a = NULL;
    CHECK(posix_memalign(&a, 64, 300) == 0 && ((uintptr_t)a & 63) == 0, "posix_memalign");
    free(a);
    free(z);
    free(p);
}

/* One region: 100 blocks of 16-500 bytes, filled, checked and freed in a shuffled order. */
static void region_work(unsigned seed) {
    void *b[100];
    resize_region_begin();
    for (int i = 0; i < 100; i++) {
        size_t n = 16 + (seed * 2654435761u + i * 40503u) % 485;
        b[i] = malloc(n);
        CHECK(b[i], "malloc in a region");
        if (b[i]) memset(b[i], i, n < 16 ? n : 16);
    }
    for (int i = 99; i > 0; i--) {
        int j = (int)((seed + i * 7919u) % (unsigned)(i + 1));
        void *t = b[i]; b[i] = b[j]; b[j] = t;
    }
    for (int i = 0; i < 100; i++) free(b[i]);
    resize_region_end();
}

static void *thread_main(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int r = 0; r < 50; r++) {
        outside_work(seed + r);
        region_work(seed + r);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int lib_first = argc > 1 && strcmp(argv[1], "lib-first") == 0;
    const char *mode = getenv("RESIZEALLOC_REGION");
    int off = mode && strcmp(mode, "off") == 0;
    int markers = !off && (!mode || strcmp(mode, "process") != 0);
    _Atomic unsigned long *calls = dlsym(RTLD_DEFAULT, "shim_calls");
    if (!calls) { puts("FAIL the shim is not loaded"); return 1; }
    unsigned long start = *calls;
    outside_work(1);
    if (lib_first && markers)
        CHECK(*calls > start, "the shim, the library's next allocator, saw none of the calls outside regions");
    unsigned long before = *calls;
    for (unsigned r = 0; r < 200; r++) region_work(r);
    unsigned long in_regions = *calls - before;
    printf("shim calls during 200 regions: %lu\n", in_regions);
    if (lib_first && markers)
        CHECK(in_regions == 0, "the shim, the library's next allocator, saw %lu calls of the regions",
              in_regions);
    if (!lib_first || off)
        CHECK(in_regions >= 200 * 200, "the shim, first in the chain or behind a library that is "
              "off, saw only %lu calls", in_regions);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)(i * 1000)) == 0, "thread");
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    pid_t pid = fork();
    if (pid == 0) {
        outside_work(7);
        region_work(7);
        thread_main((void *)7);
        _exit(failed);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the forked child");
    if (failed) return 1;
    puts("all ok");
    return 0;
}
