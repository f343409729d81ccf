/* free_unallocated_far: free of an address far past the last small block, in the same heap. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = launder(malloc(16));
    free(p + (64 << 10) + 32);
    return not_caught();
}
