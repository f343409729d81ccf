/* write_zero_size: sixteen bytes written into a block of size 0, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = launder(malloc(0)), *q = launder(malloc(0));
    memset(p, 'x', 32);
    free(q);
    free(p);
    return not_caught();
}
