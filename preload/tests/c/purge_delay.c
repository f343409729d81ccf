/* Process mode: memory freed above an arena's bound goes back after RESIZEALLOC_PURGE_DELAY_MS,
 * at the thread's next allocations, not at once, so that a buffer freed and allocated again
 * soon keeps its pages. Run with RESIZEALLOC_REGION=process and RESIZEALLOC_PURGE_DELAY_MS=50
 * ("wait"), or 0 ("at-once"), once per case (the cases would change each other's placement).
 *
 * For a block of the size given, freed at the top of the arena's run (where it goes back to
 * the bump pointer: the old library never gave it back) or below a live block:
 * 1. filled and freed, then allocated and filled again at once: no page faults the second time
 *    (with a delay of 0: it faults again, its pages went back when it was freed);
 * 2. freed again, the thread sleeps past the delay and allocates small blocks: RSS falls.
 * With "thread" instead of "top" or "below": a thread fills and frees a block and exits; the
 * next thread, started at once, takes its arena and fills a block of the same size with no
 * page faults (the exiting thread's free memory waited for the delay too, up to 32 MiB of it:
 * a larger block faults the rest in; with a delay of 0 it faults every page); past the delay,
 * the main thread's allocations give the rest back. */
#define _GNU_SOURCE
#include <pthread.h>
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

static void freed_buffer_waits_then_goes(int at_once, size_t size, int below_a_live_block) {
    long base = status_kib("VmRSS");
    long pages = (long)(size / 4096);
    char *b = filled(size, 1);
    char *pin = below_a_live_block ? filled(64 * 1024, 2) : NULL; /* arena-sized, after b */
    free(b);
    long f0 = faults();
    b = filled(size, 3);
    long refaulted = faults() - f0;
    fprintf(stderr, "%zu MiB %s: refaulted %ld pages\n", size / MiB,
            below_a_live_block ? "below a live block" : "at the top", refaulted);
    if (at_once)
        CHECK(refaulted > pages / 2, "delay 0: the freed block's pages went back at once");
    else
        CHECK(refaulted < 200, "a block freed and allocated again kept its pages");
    free(b);
    usleep(300 * 1000);
    small_work();
    long after = status_kib("VmRSS");
    CHECK(after - base < 4 * 1024, "freed memory went back after the delay");
    free(pin);
    printf("%zu MiB %s: refaulted %ld pages, RSS %ld -> %ld KiB\n", size / MiB,
           below_a_live_block ? "below a live block" : "at the top", refaulted, base, after);
}

static size_t thread_size;

static void *fill_and_exit(void *faulted) {
    struct rusage u0, u1;
    getrusage(RUSAGE_THREAD, &u0);
    char *b = filled(thread_size, 5);
    getrusage(RUSAGE_THREAD, &u1);
    free(b);
    *(long *)faulted = u1.ru_minflt - u0.ru_minflt;
    return NULL;
}

static void next_thread_takes_the_pages(int at_once, size_t size) {
    long base = status_kib("VmRSS");
    long pages = (long)(size / 4096), faulted[2];
    thread_size = size;
    for (int t = 0; t < 2; t++) {
        pthread_t th;
        pthread_create(&th, NULL, fill_and_exit, &faulted[t]);
        pthread_join(th, NULL);
    }
    fprintf(stderr, "%zu MiB, two threads: faulted %ld, then %ld pages\n", size / MiB, faulted[0], faulted[1]);
    CHECK(faulted[0] > pages / 2, "the first thread faulted its block in");
    long kept = 32 * MiB / 4096; /* an exiting thread's arena keeps at most 32 MiB waiting */
    if (at_once)
        CHECK(faulted[1] > pages / 2, "delay 0: an exiting thread gave its free memory back");
    else if (pages <= kept)
        CHECK(faulted[1] < pages / 8, "the next thread reused the exited one's pages");
    else
        CHECK(faulted[1] > (pages - kept) / 2 && faulted[1] < pages - kept / 2,
              "the next thread reused the 32 MiB that waited, and faulted the rest in");
    usleep(300 * 1000);
    small_work();
    long after = status_kib("VmRSS");
    CHECK(after - base < 4 * 1024, "an exited thread's free memory went back after the delay");
    printf("%zu MiB, two threads: faulted %ld, then %ld pages; RSS %ld -> %ld KiB\n", size / MiB,
           faulted[0], faulted[1], base, after);
}

/* argv: "wait" or "at-once", the block's size in MiB, "top", "below" or "thread". */
int main(int argc, char **argv) {
    CHECK(argc == 4, "usage: purge_delay wait|at-once MIB top|below|thread");
    int at_once = !strcmp(argv[1], "at-once");
    small_work();
    if (!strcmp(argv[3], "thread"))
        next_thread_takes_the_pages(at_once, (size_t)atol(argv[2]) * MiB);
    else
        freed_buffer_waits_then_goes(at_once, (size_t)atol(argv[2]) * MiB, !strcmp(argv[3], "below"));
    printf("all ok\n");
    return 0;
}
