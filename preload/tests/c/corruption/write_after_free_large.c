/* write_after_free_large: a large block written after its free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(LARGE);
    free(p);
    memset(p, 'x', LARGE);
    for (int i = 0; i < 4; i++) launder(malloc(LARGE));
    return not_caught();
}
