/* double_free_across_region_end: a block freed in a region, freed again after the region ended. */
#include "corruption.h"

int main(void) {
    enter_region();
    int (*end)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    if (begin) begin();
    unsigned char *p = block_between(SMALL);
    free(p);
    if (end) end();
    free(p);
    return not_caught();
}
