/*
 * bigslots.c: large zero-initialised blocks replaced at random.
 *
 * 20 slots; each of 400 iterations (x scale, at least 50) replaces a random slot with a new
 * block of 5-25 MB, zero-initialised the way C++'s make_unique<char[]>(n) does it (operator
 * new, then a memset of the whole block), and writes a few bytes into it. The old block is
 * checked (zeros but for what was written) before it is freed. Prints ops_per_s.
 */
#include "membench.h"

#define SLOTS 20

/* The memset through a pointer the compiler cannot see through: malloc followed by a memset of
 * zeros is otherwise compiled into calloc, which C++'s operator new followed by the same
 * memset never is. */
static void *(*volatile zero_fill)(void *, int, size_t) = memset;

static void stamp(unsigned char *p, size_t n, uint64_t key) {
    for (size_t at = 0; at < n; at += n / 7 + 1) p[at] = (unsigned char)(mb_mix(key) + at);
}

static void check_zero_but_stamps(const unsigned char *p, size_t n, uint64_t key) {
    size_t next = 0;
    for (size_t at = 0; at < n; at += 4093) { /* one byte per page or so, and every stamp */
        while (next < at) next += n / 7 + 1;
        unsigned char want = at == next ? (unsigned char)(mb_mix(key) + at) : 0;
        if (at != next && p[at] != 0) mb_corrupt("not zero", key, p, at);
        if (at == next && p[at] != want) mb_corrupt("stamp", key, p, at);
    }
    for (size_t at = 0; at < n; at += n / 7 + 1)
        if (p[at] != (unsigned char)(mb_mix(key) + at)) mb_corrupt("stamp", key, p, at);
}

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    long iters = mb_scaled(400, scale, 50);
    unsigned char *slot[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    uint64_t key[SLOTS] = {0};
    mb_rng r = {42};
    double t0 = mb_now();
    uint64_t sum = 0;
    for (long i = 0; i < iters; i++) {
        int s = (int)(mb_next(&r) % SLOTS);
        if (slot[s]) {
            check_zero_but_stamps(slot[s], size[s], key[s]);
            sum += size[s];
            free(slot[s]);
        }
        size[s] = mb_uniform(&r, 5u << 20, 25u << 20);
        key[s] = (uint64_t)i;
        slot[s] = mb_xmalloc(size[s]);
        zero_fill(slot[s], 0, size[s]);
        stamp(slot[s], size[s], key[s]);
    }
    for (int s = 0; s < SLOTS; s++)
        if (slot[s]) {
            check_zero_but_stamps(slot[s], size[s], key[s]);
            sum += size[s];
            free(slot[s]);
        }
    double t1 = mb_now();
    printf("result bytes checked %llu\n", (unsigned long long)sum);
    mb_metric("ops_per_s", (double)iters / (t1 - t0));
    mb_finish(t1 - t0);
    return 0;
}
