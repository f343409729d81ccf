/* double_free_large: a large block freed twice in a row. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char *p = block_between(LARGE);
    free(p);
    free(p);
    return not_caught();
}
