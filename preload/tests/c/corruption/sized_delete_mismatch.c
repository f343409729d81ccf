/* sized_delete_mismatch: C++ sized delete with a size the block was not allocated with. */
#include "corruption.h"

int main(void) {
    enter_region();
    extern void _ZdlPvm(void *, unsigned long);
    unsigned char *p = block_between(SMALL);
    _ZdlPvm(p, 4 * SMALL);
    return not_caught();
}
