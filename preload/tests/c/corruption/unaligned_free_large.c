/* unaligned_free_large: free of a large block's address plus one. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(LARGE);
    free(p + 1);
    return not_caught();
}
