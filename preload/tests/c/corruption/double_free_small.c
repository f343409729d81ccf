/* double_free_small: a small block freed twice in a row. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    free(p);
    free(p);
    return not_caught();
}
