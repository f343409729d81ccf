/*
 * gendata.c: deterministic text-like data for the xz round trip of the memory suite.
 *
 *   gendata MEGABYTES > file
 * A record number followed by one of 256 paragraphs (about 4 KiB of words from a 4,096-word
 * vocabulary, Zipf-like) with one word changed: compressible like a log of repeated
 * documents, and quick enough for xz -6 to keep the suite short.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x243f6a8885a308d3ULL;
static uint64_t next(void) { /* xorshift64* */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dULL;
}

static char vocab[4096][16];
static char pool[256][4200];

static const char *word(void) {
    uint64_t r = next();
    return vocab[(r % 4096) * (r % 4096) / 4096]; /* favours small indices */
}

int main(int argc, char **argv) {
    long mb = argc > 1 ? atol(argv[1]) : 50;
    if (mb <= 0) {
        fprintf(stderr, "usage: %s MEGABYTES\n", argv[0]);
        return 1;
    }
    for (int i = 0; i < 4096; i++) {
        int len = 2 + (int)(next() % 10);
        for (int j = 0; j < len; j++) vocab[i][j] = (char)('a' + next() % 26);
        vocab[i][len] = 0;
    }
    for (int i = 0; i < 256; i++) {
        size_t len = 0;
        while (len < 4000) len += (size_t)sprintf(pool[i] + len, next() % 12 ? "%s " : "%s\n", word());
    }
    long want = mb << 20, written = 0, record = 0;
    while (written < want) {
        const char *p = pool[next() % 256];
        size_t cut = (size_t)(next() % 3900);
        while (p[cut] != ' ') cut++;
        written += printf("%08ld %.*s %s%s", record++, (int)cut, p, word(), p + cut);
    }
    return 0;
}
