/* Process mode gives a freed phase of the next allocator's memory back: at the next allocation
 * once the frees are over, or from the frees themselves when they go on long enough with no
 * allocation in between (glibc_compat.rs, `sample_next_free`). Run with RESIZEALLOC_REGION=process
 * and RESIZEALLOC_MAX_SIZE=1, so that every block of 4-64 KiB goes to glibc, and with
 * RESIZEALLOC_GIVE_BACK_AFTER=256M (the default, 1G, is more than this phase frees).
 *
 * 400 MiB of blocks, a small block kept above them (glibc alone would keep all 400 MiB: it
 * returns memory only from the top of its heap), then every block freed in random order with
 * no allocation in between. RSS is read with open/read, which allocate nothing. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)

#define PHASE (400L << 20)
#define MAX_BLOCKS (PHASE / 4096)

static long rss_mib(void) {
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    long size = 0, resident = 0;
    if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return -1;
    return resident * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void *blocks[MAX_BLOCKS];
static long order[MAX_BLOCKS];

int main(void) {
    long n = 0, total = 0;
    while (total < PHASE) {
        size_t size = 4096 + next_rand() % (60 << 10);
        blocks[n] = malloc(size);
        CHECK(blocks[n], "malloc");
        memset(blocks[n], (int)n, size);
        total += (long)size;
        order[n] = n;
        n++;
    }
    void *pin = malloc(2048); /* glibc's (over 1 KiB), above the phase: its top stays */
    CHECK(pin, "malloc pin");
    long full = rss_mib();
    CHECK(full >= 380, "the phase is resident");
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(next_rand() % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (long i = 0; i < n; i++) free(blocks[order[i]]);
    long after_frees = rss_mib();
    /* Frees that went on with no allocation gave back from free itself, every 256 MiB or so. */
    CHECK(after_frees <= full - 200, "the frees gave the phase back on their own");
    /* The next allocation runs the give-back the last frees asked for. */
    void *p = malloc(100);
    CHECK(p, "malloc after");
    long after_alloc = rss_mib();
    CHECK(after_alloc <= 64, "the next allocation gave the rest back");
    free(p);
    free(pin);
    printf("all ok: phase %ld MiB resident, %ld MiB after the frees, %ld MiB after one malloc\n", full,
           after_frees, after_alloc);
    return 0;
}
