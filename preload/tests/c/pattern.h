/* pattern.h: a random number generator and a per-block byte pattern, for the C tests that check
 * that every block keeps its contents (slab.c, small_temporaries.c). */
#ifndef RESIZEALLOC_TEST_PATTERN_H
#define RESIZEALLOC_TEST_PATTERN_H
#include <stddef.h>
#include <stdint.h>

/* xorshift64 */
static uint64_t next_rand(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

/* The `n` bytes at `p` get the pattern of `key`; `intact` checks they still hold it. */
static void fill(unsigned char *p, size_t n, uint64_t key) { for (size_t k = 0; k < n; k++) p[k] = (unsigned char)(key * 131 + k); }
static int intact(const unsigned char *p, size_t n, uint64_t key) { for (size_t k = 0; k < n; k++) if (p[k] != (unsigned char)(key * 131 + k)) return 0; return 1; }
#endif
