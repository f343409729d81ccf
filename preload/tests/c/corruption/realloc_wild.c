/* realloc_wild: realloc of an address that was never mapped. */
#include "corruption.h"

int main(void) {
    enter_region();
    launder(realloc(launder((void *)0x7f1234560010ull), 4096));
    return not_caught();
}
