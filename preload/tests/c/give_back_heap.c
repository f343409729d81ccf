/* Process mode gives a freed phase of glibc's memory back while the program fills the
 * small-block heap (src/slab/) with as many bytes of new long-lived small blocks: glibc
 * would have reused its freed memory for them, the heap does not, so glibc's free memory must
 * go back to the kernel. Run with RESIZEALLOC_REGION=process.
 *
 * 300 MiB of 8-64 KiB blocks kept (the predictor learns their site long-lived: they go to
 * glibc), a glibc block pinned above them, then every block freed in random order, each free
 * followed by 256-byte blocks of the same total size, kept (their site is learned long-lived
 * too: the heap serves them). The peak RSS must stay near what is live (300 MiB; glibc alone
 * peaks at 330 MiB, reusing its freed chunks), not twice that (623 MiB: the freed 300 MiB
 * held on top of the new blocks). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)

#define PHASE (300L << 20)
#define MAX_BLOCKS (PHASE / 8192 + 1)
#define SMALL 256
#define MAX_SMALL_BLOCKS (PHASE / SMALL + MAX_BLOCKS)

/* Peak RSS so far (getrusage allocates nothing). */
static long peak_mib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    return ru.ru_maxrss / 1024;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void *blocks[MAX_BLOCKS];
static size_t sizes[MAX_BLOCKS];
static long order[MAX_BLOCKS];
static void *small[MAX_SMALL_BLOCKS];

__attribute__((noinline)) static void *big_block(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *small_block(void) { return malloc(SMALL); }

int main(void) {
    long n = 0, total = 0, nsmall = 0;
    while (total < PHASE) {
        sizes[n] = 8192 + next_rand() % (56 << 10);
        blocks[n] = big_block(sizes[n]);
        CHECK(blocks[n], "malloc");
        memset(blocks[n], (int)n, sizes[n]);
        total += (long)sizes[n];
        order[n] = n;
        n++;
    }
    void *pin = malloc(2048);
    CHECK(pin, "malloc pin");
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(next_rand() % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (long i = 0; i < n; i++) {
        long b = order[i];
        free(blocks[b]);
        for (size_t k = 0; k < sizes[b] / SMALL && nsmall < MAX_SMALL_BLOCKS; k++) {
            small[nsmall] = small_block();
            CHECK(small[nsmall], "malloc small");
            memset(small[nsmall], (int)nsmall, SMALL);
            nsmall++;
        }
    }
    long peak = peak_mib();
    for (long i = 0; i < nsmall; i++) {
        unsigned char *p = small[i];
        CHECK(p[0] == (unsigned char)i && p[SMALL - 1] == (unsigned char)i, "a small block changed");
        free(p);
    }
    free(pin);
    printf("%s: phase %ld MiB, then %ld small blocks; peak RSS %ld MiB\n",
           peak <= 420 ? "all ok" : "too much", total >> 20, nsmall, peak);
    CHECK(peak <= 420, "the freed phase stayed resident beside the small blocks");
    return 0;
}
