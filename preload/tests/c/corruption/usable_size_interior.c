/* usable_size_interior: malloc_usable_size of an aligned address inside a block. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(4 * SMALL);
    sink = (void *)(uintptr_t)malloc_usable_size(p + 2 * SMALL);
    return not_caught();
}
