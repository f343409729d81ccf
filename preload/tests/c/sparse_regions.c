/* Regions of large blocks touched sparsely (a byte every 4 MiB of 8 x 64 MiB): the arena's
 * capacity grows to 512 MiB, and must not be advised onto transparent huge pages, which would
 * make every touched byte cost 2 MiB (381 MiB resident against glibc's 3 MiB, where the kernel
 * has THP in madvise mode). Peak RSS must stay small; contents are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"
#include "rss.h"

#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "FAIL: %s (%s:%d)\n", msg, __FILE__, __LINE__); exit(1); } } while (0)
#define MIB (1u << 20)

int main(void) {
    for (int round = 0; round < 4; round++) {
        resize_region_begin();
        unsigned char *b[8];
        for (int i = 0; i < 8; i++) {
            b[i] = malloc(64 * MIB);
            CHECK(b[i], "malloc");
            for (size_t at = 0; at < 64 * MIB; at += 4 * MIB) b[i][at] = (unsigned char)(round + i + at / MIB);
        }
        for (int i = 0; i < 8; i++) {
            for (size_t at = 0; at < 64 * MIB; at += 4 * MIB)
                CHECK(b[i][at] == (unsigned char)(round + i + at / MIB), "contents");
            free(b[i]);
        }
        CHECK(resize_region_end() == 0, "region end");
    }
    long hwm = status_kib("VmHWM:");
    printf("peak RSS %ld KiB\n", hwm);
    CHECK(hwm > 0 && hwm < 48 * 1024, "peak RSS of sparsely touched regions stays small");
    puts("sparse_regions: all ok");
    return 0;
}
