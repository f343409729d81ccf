/* header_underflow_last: the word before the newest block overwritten, the block before it
 * freed already, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = last_above_freed(SMALL);
    memset(p - 8, 'x', 8);
    free(p);
    return not_caught();
}
