/* overflow_small_1_byte: one byte written past a small block's end, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL - 8);
    p[SMALL - 8] = 'x';
    free(p);
    return not_caught();
}
