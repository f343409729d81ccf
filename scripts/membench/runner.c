/*
 * runner.c: runs one command and reports its peak RSS and wall time.
 *
 *   runner OUT [VAR=VALUE ...] -- command [args...]
 * The VAR=VALUE assignments (LD_PRELOAD, RESIZEALLOC_REGION, ...) are set in the child only,
 * so the runner itself never runs under the allocator it measures. Writes one line to OUT:
 *   maxrss_kib=<ru_maxrss of the child, from wait4> wall_s=<seconds> status=<exit code, or
 *   128+signal>
 * ru_maxrss of a child that runs other programs (a shell) is the largest of them, not a sum.
 * It also counts the RSS the child had between fork and exec, a copy of its parent's: that is
 * why the runner (about 1 MiB) forks the program, not a big parent such as a test binary.
 * The runner exits with the child's status.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int dash = 0;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--")) { dash = i; break; }
    if (argc < 4 || !dash || dash + 1 >= argc) {
        fprintf(stderr, "usage: %s OUT [VAR=VALUE ...] -- command [args...]\n", argv[0]);
        return 125;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 125; }
    if (pid == 0) {
        for (int i = 2; i < dash; i++) putenv(argv[i]);
        execvp(argv[dash + 1], argv + dash + 1);
        perror(argv[dash + 1]);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) { perror("wait4"); return 125; }
    clock_gettime(CLOCK_MONOTONIC, &b);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 125;
    FILE *f = fopen(argv[1], "w");
    if (!f) { perror(argv[1]); return 125; }
    fprintf(f, "maxrss_kib=%ld wall_s=%.4f status=%d\n", ru.ru_maxrss,
            (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9, code);
    fclose(f);
    return code;
}
