/* header_size_grown: the 16 bytes before a block overwritten with a plausible larger size, then free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    uint64_t big = (uint64_t)(64 * SMALL);
    memcpy(p - 16, &big, 8);
    memcpy(p - 8, &big, 8);
    free(p);
    return not_caught();
}
