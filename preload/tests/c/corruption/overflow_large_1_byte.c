/* overflow_large_1_byte: one byte written past a large block's end, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(LARGE - 8);
    p[LARGE - 8] = 'x';
    free(p);
    return not_caught();
}
