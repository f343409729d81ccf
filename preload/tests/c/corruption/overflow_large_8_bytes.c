/* overflow_large_8_bytes: eight bytes written past a large block's end, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(LARGE - 8);
    memset(p + LARGE - 8, 'x', 8);
    free(p);
    return not_caught();
}
