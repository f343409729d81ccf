/* demo_app: a plain C program that marks its repeated work with regions when libresizealloc.so
 * is present (found with dlsym, so the same binary runs without it) and does the same work
 * either way. Three workloads:
 *
 *   demo_app small [N]    small blocks only: 256 temporaries of 16 B..9 KiB per iteration,
 *                         every eighth kept to the end of the iteration;
 *   demo_app large [N]    large blocks only: 8 buffers of 256 KiB..4 MiB per iteration
 *                         (below glibc's 32 MiB mmap ceiling), written sparsely and freed;
 *   demo_app frames [N]   an image-pipeline step: two 48 MiB frames (input and output), a
 *                         12 MiB and a 3 MiB scratch buffer, 16 row buffers of 192 KiB and a
 *                         histogram. glibc serves blocks above its 32 MiB mmap ceiling with a
 *                         fresh mmap every time, so every page of every frame faults in again;
 *                         the arena keeps the memory of the last iteration.
 *
 * Prints one line: the time per iteration, a checksum that must not depend on the allocator,
 * the peak RSS (the kernel's VmHWM of this process image) and whether the regions were marked
 * (the library is in the process). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void nop(void) {}
static int nop_end(void) { return 0; }
static void (*begin)(void) = nop;
static int (*end)(void) = nop_end;

static uint64_t small_iteration(uint64_t *x) {
    uint64_t checksum = 0;
    void *keep[32];
    for (int i = 0; i < 256; i++) {
        *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
        size_t n = 16 + (*x % 4) * (*x % 4) * (*x % 997);
        unsigned char *p = malloc(n);
        p[0] = (unsigned char)*x; p[n - 1] = (unsigned char)(*x >> 8);
        checksum += p[0] + p[n - 1];
        if (i % 8 == 0) keep[i / 8] = p; else free(p);
    }
    for (int i = 0; i < 32; i++) free(keep[i]);
    return checksum;
}

/* 8 buffers of 256 KiB..4 MiB, one page in 16 written, read back and freed. */
static uint64_t large_iteration(uint64_t *x) {
    uint64_t checksum = 0;
    unsigned char *bufs[8];
    size_t sizes[8];
    for (int i = 0; i < 8; i++) {
        *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
        sizes[i] = ((size_t)256 << 10) << (*x % 5); /* 256 KiB, 512 KiB, 1, 2 or 4 MiB */
        bufs[i] = malloc(sizes[i]);
        for (size_t o = 0; o < sizes[i]; o += 16 * 4096) bufs[i][o] = (unsigned char)(o >> 12);
    }
    for (int i = 0; i < 8; i++) {
        checksum += bufs[i][sizes[i] / 2 & ~(size_t)0xFFFF] + sizes[i];
        free(bufs[i]);
    }
    return checksum;
}

#define FRAME_BYTES ((size_t)48 << 20)
#define ROWS 16
#define ROW_BYTES ((size_t)192 << 10)

static uint64_t frame_iteration(uint64_t seed) {
    uint64_t *in = malloc(FRAME_BYTES), *out = malloc(FRAME_BYTES);
    uint64_t *scratch = malloc(FRAME_BYTES / 4), *small = malloc(FRAME_BYTES / 16);
    uint32_t *histogram = calloc(256, sizeof *histogram);
    size_t words = FRAME_BYTES / 8;
    /* "decode": fill the input frame */
    for (size_t i = 0; i < words; i++) in[i] = seed + i * 0x9E3779B97F4A7C15ull;
    /* "filter": rows through row buffers, into the output frame */
    unsigned char *rows[ROWS];
    for (int r = 0; r < ROWS; r++) rows[r] = malloc(ROW_BYTES);
    for (size_t i = 0; i < words; i++) out[i] = in[i] ^ (in[i] >> 29);
    for (int r = 0; r < ROWS; r++) {
        memcpy(rows[r], (unsigned char *)out + r * ROW_BYTES, ROW_BYTES);
        histogram[rows[r][r * 7] ] += 1;
    }
    /* "downscale" into the scratch buffers */
    for (size_t i = 0; i < words / 4; i++) scratch[i] = out[4 * i] + out[4 * i + 3];
    for (size_t i = 0; i < words / 16; i++) small[i] = scratch[4 * i] ^ scratch[4 * i + 1];
    uint64_t checksum = small[words / 32] + scratch[7] + out[words - 1];
    for (int b = 0; b < 256; b++) checksum += histogram[b] * (uint64_t)b;
    for (int r = 0; r < ROWS; r++) free(rows[r]);
    free(histogram); free(small); free(scratch); free(out); free(in);
    return checksum;
}

/* Peak resident set of this process image in KiB (VmHWM; unlike getrusage's ru_maxrss it does
 * not count the parent's memory from before the exec). 0 when /proc is not there. */
static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    const char *workload = argc > 1 ? argv[1] : "small";
    int frames = strcmp(workload, "frames") == 0, large = strcmp(workload, "large") == 0;
    if (!frames && !large && strcmp(workload, "small") != 0) {
        fprintf(stderr, "usage: demo_app small|large|frames [iterations]\n");
        return 2;
    }
    long iterations = argc > 2 ? atol(argv[2]) : (frames ? 30 : large ? 2000 : 20000);
    void (*b)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    int (*e)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    if (b && e) { begin = b; end = e; }
    uint64_t x = 88172645463325252ull, checksum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long it = 0; it < iterations; it++) {
        begin();
        checksum += frames ? frame_iteration((uint64_t)it) : large ? large_iteration(&x) : small_iteration(&x);
        end();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / iterations;
    printf("demo_app %s: %ld iterations, %.2f us per iteration, checksum %llu, peak RSS %ld KiB, regions %s\n",
           workload, iterations, us, (unsigned long long)checksum, peak_rss_kib(),
           begin == nop ? "unavailable (plain malloc)" : "marked");
    return 0;
}
