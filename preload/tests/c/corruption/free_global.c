/* free_global: free of an address in the program's data. */
#include "corruption.h"

int main(void) {
    enter_region();
    static unsigned char global[256];
    free(launder(global + 64));
    return not_caught();
}
