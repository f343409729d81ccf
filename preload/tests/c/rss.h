/* rss.h: a field of /proc/self/status in KiB (VmRSS, VmHWM), for the C tests' memory checks. */
#ifndef RESIZEALLOC_TEST_RSS_H
#define RESIZEALLOC_TEST_RSS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `key` with its colon ("VmHWM:"); -1 when it cannot be read. */
static long status_kib(const char *key) {
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = atol(line + strlen(key) + 1);
    fclose(f);
    return v;
}
#endif
