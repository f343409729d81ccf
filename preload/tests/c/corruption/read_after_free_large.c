/* read_after_free_large: a large block's contents read after its free (caught: the old data is gone). */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(LARGE);
    memset(p, 's', LARGE);
    free(p);
    if (p[LARGE / 2] == 's') return not_caught();
    return caught();
}
