/* The profiler's countdown on a known mix of requests, outside regions: each round mallocs 64
 * blocks of 16 B to 2 KiB and callocs 16 more, frees them, and every 16th round also allocates
 * a block of 1.5 MiB (malloc) and one of 2 MiB (calloc), which are always sampled. Argument: the
 * rounds (4000). Prints what it allocated: "allocations N", "bytes N", "large N", and a
 * checksum of the blocks' first bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 4000;
    uint64_t rng = 0x9E3779B97F4A7C15ull, allocations = 0, bytes = 0, large = 0, sum = 0;
    void *blocks[80];
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < 80; i++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            size_t size = 16 + rng % 2033;
            unsigned char *p = i < 64 ? malloc(size) : calloc(1, size);
            if (!p)
                return 1;
            sum += p[size - 1];
            p[0] = (unsigned char)i;
            blocks[i] = p;
            allocations++;
            bytes += size;
        }
        for (int i = 0; i < 80; i++)
            free(blocks[i]);
        if (r % 16 == 0) {
            unsigned char *a = malloc(3 << 19), *b = calloc(2, 1 << 20);
            if (!a || !b)
                return 1;
            a[0] = 1;
            sum += b[(2 << 20) - 1] + a[0];
            free(a);
            free(b);
            allocations += 2;
            bytes += (3 << 19) + (2 << 20);
            large += 2;
        }
    }
    printf("allocations %llu\nbytes %llu\nlarge %llu\nchecksum %llu\n",
           (unsigned long long)allocations, (unsigned long long)bytes,
           (unsigned long long)large, (unsigned long long)sum);
    return 0;
}
