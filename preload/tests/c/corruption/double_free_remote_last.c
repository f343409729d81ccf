/* double_free_remote_last: the newest block, with the block before it freed already, freed by
 * another thread and then by its owner. The thread is started before the region, so that
 * nothing it allocates lies above the block. */
#include "corruption.h"

static int ends[2];

static void *free_what_comes(void *arg) {
    (void)arg;
    void *p;
    if (read(ends[0], &p, sizeof p) == sizeof p) free(p);
    return NULL;
}

int main(void) {
    pthread_t t;
    if (pipe(ends) != 0 || pthread_create(&t, NULL, free_what_comes, NULL) != 0) return 2;
    enter_region();
    unsigned char *p = last_above_freed(SMALL);
    if (write(ends[1], &p, sizeof p) != sizeof p) return 2;
    pthread_join(t, NULL);
    free(p);
    return not_caught();
}
