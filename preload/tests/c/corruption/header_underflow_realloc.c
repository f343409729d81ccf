/* header_underflow_realloc: the 16 bytes before a block overwritten, then realloc. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    memset(p - 16, 'x', 16);
    launder(realloc(p, 4 * SMALL));
    return not_caught();
}
