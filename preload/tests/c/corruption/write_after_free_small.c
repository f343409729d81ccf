/* write_after_free_small: a small block written after its free, then freed blocks reused. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL);
    free(p);
    memset(p, 'x', SMALL);
    for (int i = 0; i < 64; i++) launder(malloc(SMALL));
    return not_caught();
}
