/* free_stack: free of a stack address. */
#include "corruption.h"

int main(void) {
    enter_region();
    unsigned char local[64];
    launder(local);
    free(local + 16);
    return not_caught();
}
