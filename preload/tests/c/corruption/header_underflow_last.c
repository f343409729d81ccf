/* header_underflow_last: the word before the newest block overwritten, the block before it
 * freed already, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    free(launder(malloc(SMALL))); /* the arena's first block takes its slow path */
    unsigned char *older = launder(malloc(SMALL));
    unsigned char *p = launder(malloc(SMALL));
    memset(p, 'a', SMALL);
    free(older);
    memset(p - 8, 'x', 8);
    free(p);
    return not_caught();
}
