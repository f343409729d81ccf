/* double_free_after_realloc: the old pointer freed after realloc moved the block. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    unsigned char *q = realloc(p, 64 * SMALL);
    launder(q);
    free(p);
    return not_caught();
}
