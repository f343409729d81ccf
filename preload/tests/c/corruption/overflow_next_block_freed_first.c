/* overflow_next_block_freed_first: a block overrun by 16 bytes, then freed before the next one. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = launder(malloc(SMALL)), *q = launder(malloc(SMALL));
    memset(p, 'x', SMALL + 16);
    free(p);
    free(q);
    return not_caught();
}
