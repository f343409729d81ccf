/* usable_size_of_freed: malloc_usable_size of a freed block. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    free(p);
    sink = (void *)(uintptr_t)malloc_usable_size(p);
    return not_caught();
}
