/* usable_size_wild: malloc_usable_size of an address that was never mapped. */
#include "corruption.h"

int main(void) {
    enter_region();
    sink = (void *)(uintptr_t)malloc_usable_size(launder((void *)0x7f1234560010ull));
    return not_caught();
}
