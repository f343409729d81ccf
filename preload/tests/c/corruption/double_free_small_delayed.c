/* double_free_small_delayed: a small block freed again after another free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(SMALL), *q = block_between(SMALL);
    free(p);
    free(q);
    free(p);
    return not_caught();
}
