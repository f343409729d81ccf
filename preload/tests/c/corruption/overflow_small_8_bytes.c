/* overflow_small_8_bytes: eight bytes written past a small block's end, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL - 8);
    memset(p + SMALL - 8, 'x', 8);
    free(p);
    return not_caught();
}
