/* errno_contract: every entry point of the malloc family on each of its failures (and on the
 * successes where glibc leaves errno alone), printed one line per case: what it returned and
 * what errno then held. errno is set to a marker before each call, so a call that resets it
 * shows. The test runs this plainly (glibc: the reference) and under the library, in markers
 * mode inside a region ("region"), outside one, and in process mode, and requires the same
 * lines. "rlimit" adds real exhaustion: RLIMIT_AS lowered to what the process holds plus
 * 64 MiB, then requests that fit no longer. Built without linking the library: the markers
 * are found with dlsym when it is preloaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MARK 4242

/* Under real exhaustion a request may fail under glibc and succeed under the library (whose
 * arenas' address space was reserved before the limit fell), or the other way round: there
 * each case prints only whether errno matched what the call returned. */
static int exhausted;

static void show(const char *what, const void *p, int err) {
    if (exhausted) {
        printf("%-44s %s\n", what, (p ? err == MARK : err == ENOMEM) ? "consistent" : "errno wrong");
        return;
    }
    printf("%-44s %-8s errno=%s\n", what, p ? "nonnull" : "NULL",
           err == MARK ? "kept" : err == ENOMEM ? "ENOMEM" : err == EINVAL ? "EINVAL" : "other");
}

static void showrc(const char *what, int rc, int err) {
    if (exhausted && rc != EINVAL) {
        printf("%-44s %s\n", what, (rc == 0 ? err == MARK : rc == ENOMEM && err == ENOMEM) ? "consistent" : "errno wrong");
        return;
    }
    printf("%-44s rc=%-5s errno=%s\n", what, rc == 0 ? "0" : rc == ENOMEM ? "ENOMEM" : rc == EINVAL ? "EINVAL" : "other",
           err == MARK ? "kept" : err == ENOMEM ? "ENOMEM" : err == EINVAL ? "EINVAL" : "other");
}

#define CALL(what, expr) do { errno = MARK; void *r_ = (expr); int e_ = errno; show(what, r_, e_); keep(r_); } while (0)

static void *kept[64];
static int nkept;
static void keep(void *p) { if (p && nkept < 64) kept[nkept++] = p; }

static void cases(const char *tag, size_t huge) {
    char what[64];
#define W(s) (snprintf(what, sizeof what, "%s %s", tag, s), what)
    CALL(W("malloc(huge)"), malloc(huge));
    CALL(W("malloc(SIZE_MAX)"), malloc(SIZE_MAX));
    CALL(W("malloc(100)"), malloc(100));
    CALL(W("calloc(huge, 1)"), calloc(huge, 1));
    CALL(W("calloc overflow"), calloc(SIZE_MAX / 2, 3));
    CALL(W("calloc(10, 10)"), calloc(10, 10));
    void *p = malloc(64);
    memset(p, 7, 64);
    errno = MARK;
    void *grown = realloc(p, huge);
    show(W("realloc(p, huge)"), grown, errno);
    if (grown) p = grown;
    printf("%s realloc(p, huge) kept p's bytes: %s\n", tag, ((unsigned char *)p)[63] == 7 ? "yes" : "no");
    CALL(W("realloc(p, SIZE_MAX)"), realloc(p, SIZE_MAX));
    CALL(W("reallocarray overflow"), reallocarray(p, SIZE_MAX / 2, 3)); /* NULL: p stays */
    CALL(W("reallocarray(NULL, huge, 1)"), reallocarray(NULL, huge, 1));
    errno = MARK;
    void *q = realloc(p, 200);
    show(W("realloc(p, 200)"), q, errno);
    errno = MARK;
    free(q);
    printf("%s free(p): errno=%s\n", tag, errno == MARK ? "kept" : "changed");
    errno = MARK;
    free(NULL);
    printf("%s free(NULL): errno=%s\n", tag, errno == MARK ? "kept" : "changed");
    CALL(W("memalign(SIZE_MAX/2+2, 16)"), memalign(SIZE_MAX / 2 + 2, 16));
    CALL(W("memalign(64, huge)"), memalign(64, huge));
    CALL(W("memalign(48, 100)"), memalign(48, 100));
    CALL(W("aligned_alloc(SIZE_MAX/2+2, 16)"), aligned_alloc(SIZE_MAX / 2 + 2, 16));
    CALL(W("aligned_alloc(64, huge)"), aligned_alloc(64, huge));
    CALL(W("aligned_alloc(48, 96)"), aligned_alloc(48, 96));
    CALL(W("valloc(huge)"), valloc(huge));
    CALL(W("pvalloc(huge)"), pvalloc(huge));
    CALL(W("pvalloc(SIZE_MAX)"), pvalloc(SIZE_MAX));
    void *out = NULL;
    errno = MARK;
    int rc = posix_memalign(&out, 24, 100);
    showrc(W("posix_memalign(24, 100)"), rc, errno);
    errno = MARK;
    rc = posix_memalign(&out, 64, huge);
    showrc(W("posix_memalign(64, huge)"), rc, errno);
    errno = MARK;
    rc = posix_memalign(&out, 64, 100);
    showrc(W("posix_memalign(64, 100)"), rc, errno);
    if (rc == 0) free(out);
    for (int i = 0; i < nkept; i++) free(kept[i]);
    nkept = 0;
}

int main(int argc, char **argv) {
    int region = 0, rlimit = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "region")) region = 1;
        if (!strcmp(argv[i], "rlimit")) rlimit = 1;
    }
    int (*begin)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    int (*end)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    if (region && begin) begin();
    /* More than any machine has, less than PTRDIFF_MAX: refused for want of memory. */
    cases("big", (size_t)1 << 60);
    if (rlimit) {
        /* Real exhaustion: what is mapped now plus 64 MiB. */
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (!f || fscanf(f, "%lu", &pages) != 1) { puts("cannot read statm"); return 1; }
        fclose(f);
        struct rlimit rl = { (rlim_t)pages * 4096 + (64ul << 20), RLIM_INFINITY };
        if (setrlimit(RLIMIT_AS, &rl) != 0) { perror("setrlimit"); return 1; }
        exhausted = 1;
        cases("exhausted", (size_t)256 << 20);
    }
    if (region && end) end();
    return 0;
}
