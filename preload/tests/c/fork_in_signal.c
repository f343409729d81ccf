/* fork_in_signal: fork() called from a signal handler that interrupts fork() (glibc bug 24161,
 * the case of glibc's tst-mallocfork2). A second process sends SIGUSR1 to this one tens of
 * thousands of times a second while this one forks in a loop, allocating between forks (the
 * handler forks too, its child exits at once). The program must run to its end: a fork handler
 * that waits for a lock its own thread holds (the interrupted fork's) hangs it, and the test
 * runs it under a timeout.
 * Single-threaded, as in glibc's test: glibc's own fork takes no malloc lock then either. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "resizealloc.h"

static volatile sig_atomic_t handler_forks;

static void handler(int sig) {
    (void)sig;
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid > 0) {
        handler_forks++;
        /* The parent's loop reaps it (waitpid(-1)). */
    }
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 2000;
    int in_region = argc > 2 && strcmp(argv[2], "region") == 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) { perror("sigaction"); return 1; }
    pid_t me = getpid();
    pid_t sender = fork();
    if (sender == 0) {
        for (;;) {
            if (kill(me, SIGUSR1) != 0) _exit(0); /* the parent is gone */
            usleep(20); /* tens of thousands a second, without taking a whole core */
        }
    }
    if (sender < 0) { perror("fork"); return 1; }
    if (in_region) resize_region_begin();
    int failures = 0;
    for (int i = 0; i < iterations; i++) {
        char *p = malloc(16 + i % 4000);
        if (!p) { failures++; break; }
        memset(p, i, 16);
        pid_t pid = fork();
        if (pid == 0) {
            char *q = malloc(100);
            _exit(q && p[0] == (char)i ? 0 : 3);
        }
        if (pid < 0) { perror("fork"); failures++; break; }
        int status;
        while (waitpid(pid, &status, 0) < 0) {}
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;
        while (waitpid(-1, NULL, WNOHANG) > 0) {} /* the handler's children */
        free(p);
    }
    if (in_region) resize_region_end();
    kill(sender, SIGKILL);
    waitpid(sender, NULL, 0);
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
    printf("forks in the handler: %d, failures: %d\n", (int)handler_forks, failures);
    if (failures) return 1;
    puts("all ok");
    return 0;
}
