/* free_protected_mapping: free of a PROT_NONE page. */
#include "corruption.h"

int main(void) {
    enter_region();
    void *m = mmap(NULL, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    free((char *)m + 4096);
    return not_caught();
}
