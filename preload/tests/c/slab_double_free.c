/* A double free of a small-block heap block must abort, with a message on stderr: run with
 * RESIZEALLOC_REGION=process and RESIZEALLOC_MAX_SIZE=1, so that malloc(100) is served there.
 * argv[1] "cached": the block goes to the thread's block cache first (the common case);
 * "page": the cache of its class is full, so the block goes to its page. */
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int page = argc > 1 && !strcmp(argv[1], "page");
    char *keep[200];
    for (int i = 0; i < 200; i++) keep[i] = malloc(100);
    char *p = malloc(100);
    memset(p, 1, 100);
    if (page)
        for (int i = 0; i < 200; i++) free(keep[i]); /* fills the class's cache */
    free(p);
    free(p);
    return 0; /* not reached */
}
