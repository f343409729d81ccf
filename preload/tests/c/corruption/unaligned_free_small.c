/* unaligned_free_small: free of a small block's address plus one. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    free(p + 1);
    return not_caught();
}
