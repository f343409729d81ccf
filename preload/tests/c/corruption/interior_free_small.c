/* interior_free_small: free of an aligned address inside a small block. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(4 * SMALL);
    free(p + 2 * SMALL);
    return not_caught();
}
