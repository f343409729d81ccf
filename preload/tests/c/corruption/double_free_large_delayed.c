/* double_free_large_delayed: a large block freed again after another free. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(LARGE), *q = block_between(LARGE);
    free(p);
    free(q);
    free(p);
    return not_caught();
}
