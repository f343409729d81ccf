/* rlimit_after: a program that lowers RLIMIT_AS after the library reserved its address space,
 * as test harnesses, sandboxes and judges do at the start of main. First it allocates (inside
 * a region in markers mode; anything in process mode), so that the reservations exist; then
 * it sets RLIMIT_AS to what it has mapped that is not the library's plus 200 MiB, and needs:
 * threads (their stacks are mappings), large blocks outside regions (glibc mmaps them), and
 * regions that still work (from the arena, or passed through). "setrlimit" lowers the limit
 * with setrlimit, "prlimit" with prlimit. The threads run one after another, so that glibc
 * makes one arena for them (each reserves 64 MiB) and the program's own needs stay well
 * inside the limit under glibc alone. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "resizealloc.h"

static int failed;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL " __VA_ARGS__); puts(""); failed = 1; } } while (0)

static void region_work(int n) {
    resize_region_begin();
    char *b[64];
    for (int i = 0; i < 64; i++) { b[i] = malloc(100 + (i * 37 + n) % 3000); CHECK(b[i], "malloc in a region"); if (b[i]) memset(b[i], i, 100); }
    for (int i = 0; i < 64; i++) free(b[i]);
    resize_region_end();
}

static void *thread_main(void *arg) {
    (void)arg;
    region_work(1);
    char *big = malloc(16 << 20);
    CHECK(big, "a 16 MiB block outside regions in a thread");
    if (big) { memset(big, 1, 16 << 20); free(big); }
    return NULL;
}

/* Bytes mapped in all (VmSize), and in mappings that can be accessed (not PROT_NONE: what
 * the process uses, the library's committed memory included, its bare reservations not). */
static void mapped(size_t *all, size_t *accessible) {
    *all = *accessible = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
        *all += hi - lo;
        if (strncmp(perms, "---", 3) != 0) *accessible += hi - lo;
    }
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "setrlimit";
    /* The reservations come to exist: the arena's and, in process mode, the small-block heap's. */
    region_work(0);
    void *keep = malloc(100);
    size_t before, used;
    mapped(&before, &used);
    size_t limit = used + ((size_t)200 << 20);
    struct rlimit rl = { limit, RLIM_INFINITY };
    int rc;
    if (!strcmp(how, "prlimit")) rc = prlimit(0, RLIMIT_AS, &rl, NULL);
    else rc = setrlimit(RLIMIT_AS, &rl);
    CHECK(rc == 0, "lowering RLIMIT_AS");
    /* Lowered again, a little: the library trims what it already trimmed, and must neither
     * map nor claim anything past what it still holds. */
    region_work(3);
    rl.rlim_cur -= 1 << 20;
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "lowering RLIMIT_AS again");
    region_work(4);
    for (int i = 0; i < 4; i++) {
        pthread_t t;
        int e = pthread_create(&t, NULL, thread_main, NULL);
        CHECK(e == 0, "pthread_create %d under the lowered limit: error %d", i, e);
        if (e == 0) pthread_join(t, NULL);
    }
    char *big = malloc(48 << 20);
    CHECK(big, "a 48 MiB block outside regions");
    if (big) { memset(big, 2, 48 << 20); free(big); }
    region_work(2);
    size_t after, used_after;
    mapped(&after, &used_after);
    printf("mapped %zu MiB (%zu MiB accessible) before the limit of %zu MiB, %zu MiB after\n",
           before >> 20, used >> 20, limit >> 20, after >> 20);
    CHECK(after <= limit, "the process maps %zu MiB, above its limit", after >> 20);
    free(keep);
    if (failed) return 1;
    puts("all ok");
    return 0;
}
