/* calloc_overflow: calloc whose count times size overflows (caught: it returns NULL). */
#include "corruption.h"

int main(void) {
    enter_region();
    void *p = launder(calloc(SIZE_MAX / 8 + 2, 16));
    if (p) return not_caught();
    return caught();
}
