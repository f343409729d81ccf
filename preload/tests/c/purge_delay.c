/* Process mode: memory freed above an arena's bound goes back after RESIZEALLOC_PURGE_DELAY_MS,
 * at the thread's next allocations, not at once, so that a buffer freed and allocated again
 * soon keeps its pages; a block of 32 MiB or more goes back when it is freed. Run with
 * RESIZEALLOC_REGION=process and RESIZEALLOC_PURGE_DELAY_MS=50, or with 0 and the argument
 * "at-once".
 *
 * 1. A 200 MiB block, filled and freed at the top of the arena's run: RSS falls at once.
 * 2. An 8 MiB block, filled and freed, then allocated and filled again at once: no page faults
 *    the second time (with a delay of 0: it faults again, its pages went back).
 * 3. Freed again, the thread sleeps past the delay and allocates small blocks: RSS falls.
 * 4. The same with the 8 MiB block freed below a live block (not at the top). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "rss.h"

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)
#define MiB (1L << 20)

static long faults(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static char *filled(size_t n, int byte) {
    char *p = malloc(n);
    CHECK(p, "malloc");
    memset(p, byte, n);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}

/* Allocations through the predictor: a periodic look runs every few thousand. */
static void small_work(void) {
    for (int i = 0; i < 20000; i++) {
        void *volatile q = malloc(16 + (size_t)i % 500);
        free(q);
    }
}

static void freed_buffer_waits_then_goes(int at_once, int below_a_live_block) {
    long base = status_kib("VmRSS");
    char *b = filled(8 * MiB, 1);
    char *pin = below_a_live_block ? filled(64 * 1024, 2) : NULL; /* arena-sized, after b */
    free(b);
    long f0 = faults();
    b = filled(8 * MiB, 3);
    long refaulted = faults() - f0;
    if (at_once)
        CHECK(refaulted > 1000, "delay 0: the freed block's pages went back at once");
    else
        CHECK(refaulted < 200, "a block freed and allocated again kept its pages");
    free(b);
    usleep(300 * 1000);
    small_work();
    long after = status_kib("VmRSS");
    CHECK(after - base < 4 * 1024, "freed memory went back after the delay");
    free(pin);
    printf("8 MiB %s: refaulted %ld pages, RSS %ld -> %ld KiB\n",
           below_a_live_block ? "below a live block" : "at the top", refaulted, base, after);
}

int main(int argc, char **argv) {
    int at_once = argc > 1 && !strcmp(argv[1], "at-once");
    small_work();
    long base = status_kib("VmRSS");
    char *big = filled(200 * MiB, 7);
    long full = status_kib("VmRSS");
    free(big);
    long freed = status_kib("VmRSS");
    printf("200 MiB: RSS %ld -> %ld -> %ld KiB\n", base, full, freed);
    CHECK(full - base > 190 * 1024, "the block was resident");
    CHECK(freed - base < 4 * 1024, "a 200 MiB block went back when freed");
    freed_buffer_waits_then_goes(at_once, 0);
    freed_buffer_waits_then_goes(at_once, 1);
    printf("all ok\n");
    return 0;
}
