/* overflow_into_next_block: a block overrun by 16 bytes into the next one, then both freed. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = launder(malloc(SMALL)), *q = launder(malloc(SMALL));
    memset(p, 'x', SMALL + 16);
    free(q);
    free(p);
    return not_caught();
}
