/* interior_free_large: free of a page inside a large block. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(LARGE);
    free(p + 8192);
    return not_caught();
}
