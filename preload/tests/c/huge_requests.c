/* Requests no allocator can serve get NULL and ENOMEM, never a crash, in and out of regions, in
 * whatever mode the environment sets (the test runs it in markers and in process mode: the
 * predictor's path once overflowed its byte clock on malloc(SIZE_MAX), a panic in debug
 * builds). Prints "all ok", or "FAIL" lines and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "resizealloc.h"

static int failures;

static void expect_null(void *p, const char *what, const char *where) {
    if (p != NULL || errno != ENOMEM) {
        printf("FAIL %s %s: %p, errno %d\n", where, what, p, errno);
        failures++;
    }
}

/* Through a volatile, so that the compiler neither warns about nor folds the sizes. */
static volatile size_t huge[] = {SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX / 2 + 1, (size_t)1 << 50,
                                 ((size_t)1 << 36) + 1};

static void requests(const char *where) {
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        size_t n = huge[i];
        errno = 0;
        expect_null(malloc(n), "malloc", where);
        errno = 0;
        expect_null(calloc(1, n), "calloc", where);
        errno = 0;
        expect_null(calloc(n, 2), "calloc overflowing", where);
        void *p = malloc(64);
        memset(p, 1, 64);
        errno = 0;
        expect_null(realloc(p, n), "realloc", where);
        if (((unsigned char *)p)[63] != 1) {
            printf("FAIL %s: realloc lost the block\n", where);
            failures++;
        }
        free(p);
    }
}

int main(void) {
    /* Enough ordinary work first that process mode routes the thread through its predictor. */
    for (int i = 0; i < 20000; i++) {
        char *q = malloc(2000 + (size_t)(i % 1000));
        q[0] = (char)i;
        free(q);
    }
    for (int round = 0; round < 3; round++) {
        requests("outside");
        resize_region_begin();
        requests("region");
        resize_region_end();
    }
    if (failures) { printf("%d failures\n", failures); return 1; }
    printf("all ok\n");
    return 0;
}
