/* free_unallocated_neighbour: free of the slot right after the last small block. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = launder(malloc(16));
    free(p + 32);
    return not_caught();
}
