/* header_underflow_word: the word before a block overwritten, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    memset(p - 8, 'x', 8);
    free(p);
    return not_caught();
}
