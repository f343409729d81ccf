/* double_free_remote: a block freed by another thread, then by its owner. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    pthread_t t;
    pthread_create(&t, NULL, (void *(*)(void *))free, p);
    pthread_join(t, NULL);
    free(p);
    return not_caught();
}
