/* realloc_of_freed: realloc of a block already freed. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    free(p);
    launder(realloc(p, 2 * SMALL));
    return not_caught();
}
