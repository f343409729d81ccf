/* impossibly_large_malloc: malloc of nearly SIZE_MAX (caught: it returns NULL). */
#include "corruption.h"

int main(void) {
    enter_region();
    void *p = launder(malloc(SIZE_MAX - 4096));
    if (p) return not_caught();
    return caught();
}
