/* free_wild: free of an address that was never mapped. */
#include "corruption.h"

int main(void) {
    enter_region();
    free(launder((void *)0x7f1234560010ull));
    return not_caught();
}
