/* mallinfo_counts: mallinfo2's "bytes in use" (uordblks) grows by at least what the program
 * allocates and falls back when it frees, whoever serves the blocks (glibc's tst-mallinfo2
 * reads it so): 1,000 blocks of 32 bytes, then 19 of 160 to 3,040 bytes, in markers mode
 * inside a region ("region") or in process mode. hblkhd stays glibc's mmapped bytes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL " __VA_ARGS__); puts(""); failed = 1; } } while (0)

int main(int argc, char **argv) {
    int region = argc > 1 && strcmp(argv[1], "region") == 0;
    int (*begin)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    int (*end)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    if (region && begin) begin();
    static void *small[1000], *mid[20];
    struct mallinfo2 m0 = mallinfo2();
    for (int i = 0; i < 1000; i++) { small[i] = malloc(32); memset(small[i], i, 32); }
    struct mallinfo2 m1 = mallinfo2();
    CHECK(m1.uordblks >= m0.uordblks + 32000, "uordblks %zu -> %zu after 1000 x 32 B", m0.uordblks, m1.uordblks);
    size_t total = 0;
    for (int i = 1; i < 20; i++) { mid[i] = malloc(160 * i); memset(mid[i], i, 160 * i); total += 160 * i; }
    struct mallinfo2 m2 = mallinfo2();
    CHECK(m2.uordblks >= m1.uordblks + total, "uordblks %zu -> %zu after %zu B", m1.uordblks, m2.uordblks, total);
    CHECK(m2.arena >= m2.uordblks, "arena %zu below uordblks %zu", m2.arena, m2.uordblks);
    CHECK(m2.hblkhd == m0.hblkhd, "hblkhd %zu -> %zu: no block here is mmapped by glibc", m0.hblkhd, m2.hblkhd);
    struct mallinfo m2i = mallinfo();
    CHECK((size_t)(unsigned)m2i.uordblks == (m2.uordblks & 0xffffffffu), "mallinfo is mallinfo2 cut to int");
    for (int i = 0; i < 1000; i++) free(small[i]);
    for (int i = 1; i < 20; i++) free(mid[i]);
    struct mallinfo2 m3 = mallinfo2();
    CHECK(m3.uordblks + 32000 <= m2.uordblks, "uordblks %zu -> %zu after the frees", m2.uordblks, m3.uordblks);
    if (region && end) end();
    if (failed) return 1;
    puts("all ok");
    return 0;
}
