/* free_foreign_mapping: free of a page the program mapped itself. */
#include "corruption.h"

int main(void) {
    enter_region();
    void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    free((char *)m + 4096);
    return not_caught();
}
