/* fork() inside a region: the child keeps its region state and memory, and keeps working. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "resizealloc.h"

int main(void) {
    resize_region_begin();
    char *before = malloc(10000);
    memset(before, 0x42, 10000);
    pid_t pid = fork();
    if (pid == 0) {
        if (resize_region_depth() != 1) { puts("FAIL child lost its region"); (fflush(stdout), _exit(1)); }
        for (int i = 0; i < 10000; i++) if (before[i] != 0x42) { puts("FAIL child memory"); (fflush(stdout), _exit(1)); }
        for (int i = 0; i < 10000; i++) { char *p = malloc(100 + i % 900); memset(p, 1, 100); free(p); }
        free(before);
        if (resize_region_end() != 0) { puts("FAIL child region end"); (fflush(stdout), _exit(1)); }
        resize_region_begin();
        char *again = malloc(1 << 20);
        memset(again, 3, 1 << 20);
        free(again);
        resize_region_end();
        puts("child ok");
        (fflush(stdout), _exit(0));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    for (int i = 0; i < 10000; i++) if (before[i] != 0x42) { puts("FAIL parent memory"); return 1; }
    free(before);
    if (resize_region_end() != 0) { puts("FAIL parent region end"); return 1; }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { puts("FAIL child status"); return 1; }
    puts("all ok");
    return 0;
}
