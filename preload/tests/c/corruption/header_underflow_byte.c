/* header_underflow_byte: the byte before a block overwritten, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    p[-1] ^= 0x40;
    free(p);
    return not_caught();
}
