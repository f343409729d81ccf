/* usable_size_unaligned: malloc_usable_size of a block's address plus one. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    sink = (void *)(uintptr_t)malloc_usable_size(p + 1);
    return not_caught();
}
