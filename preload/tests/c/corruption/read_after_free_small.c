/* read_after_free_small: a small block's contents read after its free (caught: the old data is gone). */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    memset(p, 's', SMALL);
    free(p);
    for (int i = 0; i < SMALL; i++) if (p[i] == 's' && p[i + 1 < SMALL ? i + 1 : i] == 's') return not_caught();
    return caught();
}
