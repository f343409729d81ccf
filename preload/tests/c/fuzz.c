/* fuzz.c: a differential fuzzer of the malloc family.
 *
 *   fuzz SEED [ROUNDS [OPS]]
 *
 * Runs ROUNDS rounds (default 6); each round starts 2 to 4 threads that do OPS operations each
 * (default 20000), chosen at random from the seed: malloc, calloc, realloc (grow, shrink, to 0,
 * of NULL), free, posix_memalign, aligned_alloc, memalign, malloc_usable_size (and writes up to
 * it), rewrites of a block, region begin and end (nested, and unbalanced ends), and hand-offs of
 * blocks to the next thread while both run. A thread ends with its blocks still live, some of
 * them in a region it never ended; the main thread frees part of them and hands the rest to
 * the next round's threads, so blocks are freed and reallocated by threads that did not
 * allocate them, while their owner runs and after it exited.
 *
 * Every block holds a pattern derived from its id and version, checked before it is freed,
 * after every realloc (the kept prefix) and when it changes hands; a calloc block is checked
 * for zeros first. The first wrong byte ends the run with one line on stderr naming the seed,
 * the thread, the operation and the block, and exit status 3.
 *
 * What each thread does depends on the seed only (a hand-off's receiver checks and frees what
 * it receives whenever it finds it, and that draws no random number), so the summary line
 *   fuzz seed S: N operations, M blocks checked, checksum X
 * is the same under every allocator: plain glibc is the reference (scripts/fuzz.sh compares).
 * The region calls are looked up with dlsym and skipped where the library is not loaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 192     /* blocks a thread holds at once */
#define INBOX 64      /* blocks on their way to the next thread */
#define MAX_THREADS 4
#define MAX_DEPTH 6   /* regions a thread nests */

typedef struct {
    unsigned char *p;  /* NULL: the slot is empty */
    size_t size;       /* requested size */
    uint64_t id;       /* unique in the run, the same under every allocator */
    uint32_t version;  /* bumped by each rewrite of the whole block */
    uint32_t align;    /* requested alignment (16: the default) */
} Block;

typedef struct {
    pthread_mutex_t lock;
    Block items[INBOX];
    int n;
} Inbox;

typedef struct Worker {
    int index;           /* in its round */
    uint64_t rng;
    uint64_t next_id;    /* the worker's ids: (round, index, counter) */
    Block slots[SLOTS];
    Inbox inbox;         /* what the previous worker of the round hands on */
    struct Worker *next; /* the worker this one hands blocks to */
    uint64_t ops, checked, sum;
    int depth;           /* regions this worker began and has not ended */
    int base_depth;      /* resize_region_depth() at the thread's start (1 in process mode) */
} Worker;

static uint64_t seed;
static void (*region_begin)(void);
static int (*region_end)(void);
static int (*region_depth)(void);

/* splitmix64: the random numbers and the patterns. */
static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
static uint64_t rnd(uint64_t *s) { *s += 0x9E3779B97F4A7C15ull; return mix(*s); }
static uint64_t below(uint64_t *s, uint64_t n) { return rnd(s) % n; }

static _Noreturn void fail(const Worker *w, const Block *b, const char *what, size_t at) {
    fprintf(stderr,
            "fuzz: SEED=%llu thread %d, operation %llu: block %#llx (size %zu, version %u, at %p): "
            "%s (byte %zu)\n",
            (unsigned long long)seed, w ? w->index : -1, (unsigned long long)(w ? w->ops : 0),
            (unsigned long long)b->id, b->size, b->version, (void *)b->p, what, at);
    _exit(3);
}

/* The pattern of a block: one 64-bit word per 8 bytes, from the block's id and version. */
static uint64_t word_of(uint64_t key, size_t i) { return key + i * 0xD1B54A32D192ED03ull; }
static uint64_t key_of(const Block *b) { return mix(b->id ^ ((uint64_t)b->version << 48)); }

static void stamp_range(const Block *b, size_t from, size_t to) {
    uint64_t key = key_of(b);
    for (size_t k = from; k < to;) {
        uint64_t w = word_of(key, k / 8);
        if (k % 8 == 0 && k + 8 <= to) {
            memcpy(b->p + k, &w, 8);
            k += 8;
        } else {
            b->p[k] = (unsigned char)(w >> (8 * (k % 8)));
            k++;
        }
    }
}

/* The first byte in [from, to) that does not hold the pattern, or `to`. */
static size_t first_wrong(const Block *b, size_t from, size_t to) {
    uint64_t key = key_of(b);
    for (size_t k = from; k < to;) {
        uint64_t w = word_of(key, k / 8);
        if (k % 8 == 0 && k + 8 <= to) {
            uint64_t got;
            memcpy(&got, b->p + k, 8);
            if (got != w) {
                while (b->p[k] == (unsigned char)(w >> (8 * (k % 8)))) k++;
                return k;
            }
            k += 8;
        } else {
            if (b->p[k] != (unsigned char)(w >> (8 * (k % 8)))) return k;
            k++;
        }
    }
    return to;
}

static void check(const Worker *w, const Block *b, size_t upto, const char *when) {
    size_t at = first_wrong(b, 0, upto);
    if (at != upto) fail(w, b, when, at);
}

static void check_aligned(const Worker *w, const Block *b) {
    if ((uintptr_t)b->p % b->align != 0) fail(w, b, "misaligned", 0);
}

/* A block's share of the checksum: what it is, not where it is, so the sum is the same under
 * every allocator and in any order of frees. */
static uint64_t share(const Block *b) { return mix(b->id * 31 + b->size * 7 + b->version); }

/* Checks a block, adds it to the worker's checksum and frees it. */
static void retire(Worker *w, Block *b) {
    check(w, b, b->size, "pattern lost before free");
    w->checked++;
    w->sum += share(b);
    free(b->p);
    b->p = NULL;
}

/* Sizes: mostly small, some of a few KiB, a few large (log-uniform within each class). */
static size_t pick_size(uint64_t *r) {
    uint64_t c = below(r, 100);
    unsigned lo, hi;
    if (c < 2) return 0;
    if (c < 60) lo = 0, hi = 7;        /* 1 B .. 128 B */
    else if (c < 85) lo = 7, hi = 12;  /* .. 4 KiB */
    else if (c < 99) lo = 12, hi = 17; /* .. 128 KiB */
    else lo = 17, hi = 21;             /* .. 2 MiB */
    unsigned bits = lo + (unsigned)below(r, hi - lo + 1);
    size_t top = (size_t)1 << bits;
    return top / 2 + 1 + below(r, top / 2 + (top == 1));
}

static uint64_t new_id(Worker *w) { return w->next_id++; }

static void do_malloc(Worker *w, Block *b, int zeroed) {
    size_t n = pick_size(&w->rng);
    uint64_t id = new_id(w);
    if (b->p) retire(w, b);
    unsigned char *p;
    if (zeroed) {
        size_t count = 1 + below(&w->rng, 4), each = n / count + 1;
        n = count * each;
        p = calloc(count, each);
    } else {
        p = malloc(n);
    }
    *b = (Block){p, n, id, 0, 16};
    if (!p) fail(w, b, zeroed ? "calloc returned NULL" : "malloc returned NULL", 0);
    check_aligned(w, b);
    if (zeroed)
        for (size_t k = 0; k < n; k++)
            if (p[k]) fail(w, b, "calloc block not zero", k);
    stamp_range(b, 0, n);
}

static void do_aligned(Worker *w, Block *b) {
    static const uint32_t aligns[] = {16, 32, 64, 128, 256, 4096, 8192, 65536};
    uint32_t a = aligns[below(&w->rng, 8)];
    size_t n = pick_size(&w->rng);
    uint64_t how = below(&w->rng, 3);
    uint64_t id = new_id(w);
    if (b->p) retire(w, b);
    void *p = NULL;
    if (how == 0) {
        int e = posix_memalign(&p, a, n);
        if (e) p = NULL;
    } else if (how == 1) {
        n = (n + a - 1) / a * a; /* aligned_alloc's size is a multiple of the alignment */
        p = aligned_alloc(a, n);
    } else {
        p = memalign(a, n);
    }
    *b = (Block){p, n, id, 0, a};
    if (!p) fail(w, b, "aligned allocation returned NULL", 0);
    check_aligned(w, b);
    stamp_range(b, 0, n);
}

static void do_realloc(Worker *w, Block *b) {
    uint64_t how = below(&w->rng, 100);
    size_t n;
    if (!b->p) n = pick_size(&w->rng);
    else if (how < 45) n = b->size + 1 + below(&w->rng, b->size * 3 + 16); /* grow */
    else if (how < 55) n = b->size + 1 + below(&w->rng, 64);                /* grow a little */
    else if (how < 97) n = b->size ? below(&w->rng, b->size) + 1 : 1;       /* shrink */
    else n = 0;                                                              /* to 0 */
    if (n > (4u << 20)) n = 4u << 20;
    if (!b->p) {
        uint64_t id = new_id(w);
        unsigned char *p = realloc(NULL, n);
        *b = (Block){p, n, id, 0, 16};
        if (!p) fail(w, b, "realloc(NULL, n) returned NULL", 0);
        check_aligned(w, b);
        stamp_range(b, 0, n);
        return;
    }
    check(w, b, b->size, "pattern lost before realloc");
    size_t kept = n < b->size ? n : b->size;
    if (n == 0) {
        /* glibc frees the block and returns NULL; an allocator may return a block of size 0
         * instead. Either way the old block is checked and gone. */
        w->checked++;
        w->sum += share(b);
        void *p = realloc(b->p, 0);
        free(p);
        b->p = NULL;
        return;
    }
    unsigned char *p = realloc(b->p, n);
    if (!p) fail(w, b, "realloc returned NULL", 0);
    b->p = p;
    b->align = 16;
    check_aligned(w, b);
    size_t at = first_wrong(b, 0, kept);
    if (at != kept) fail(w, b, "pattern lost by realloc", at);
    b->size = n;
    stamp_range(b, kept, n);
}

static void do_usable(Worker *w, Block *b) {
    if (!b->p) return;
    size_t u = malloc_usable_size(b->p);
    if (u < b->size) fail(w, b, "malloc_usable_size smaller than the request", u);
    /* The bytes past the request up to the usable size are the program's to write. */
    memset(b->p + b->size, 0xA5, u - b->size);
    check(w, b, b->size, "pattern lost by a write past the request within the usable size");
}

static void hand_on(Worker *w, Block *b) {
    if (!b->p || !w->next) return;
    check(w, b, b->size, "pattern lost before a hand-off");
    Inbox *in = &w->next->inbox;
    pthread_mutex_lock(&in->lock);
    int full = in->n == INBOX;
    if (!full) in->items[in->n++] = *b;
    pthread_mutex_unlock(&in->lock);
    if (full) {
        retire(w, b); /* the receiver is behind: the block is checked and freed here */
    } else {
        b->p = NULL;
    }
}

/* Checks and frees whatever the previous worker handed on. Draws no random number. */
static void drain(Worker *w) {
    Inbox *in = &w->inbox;
    Block got[INBOX];
    pthread_mutex_lock(&in->lock);
    int n = in->n;
    memcpy(got, in->items, sizeof(Block) * (size_t)n);
    in->n = 0;
    pthread_mutex_unlock(&in->lock);
    for (int i = 0; i < n; i++) retire(w, &got[i]);
}

static void do_region(Worker *w, int begin) {
    if (!region_begin) return;
    if (begin) {
        if (w->depth == MAX_DEPTH) return;
        region_begin();
        w->depth++;
    } else if (w->depth > 0) {
        if (region_end() != 0) fail(w, &(Block){0}, "resize_region_end of a begun region failed", 0);
        w->depth--;
    } else if (w->base_depth == 0) {
        /* An end without a begin: an error, and the thread's state unchanged. */
        if (region_end() != -1) fail(w, &(Block){0}, "an unbalanced resize_region_end did not return -1", 0);
    }
    if (region_depth() != w->base_depth + w->depth)
        fail(w, &(Block){0}, "resize_region_depth does not count the regions begun", 0);
}

static void *work(void *arg) {
    Worker *w = arg;
    uint64_t ops = w->ops;
    w->ops = 0;
    w->base_depth = region_depth ? region_depth() : 0;
    for (; w->ops < ops; w->ops++) {
        if (w->ops % 16 == 0) drain(w);
        Block *b = &w->slots[below(&w->rng, SLOTS)];
        uint64_t op = below(&w->rng, 100);
        if (op < 28) do_malloc(w, b, 0);
        else if (op < 36) do_malloc(w, b, 1);
        else if (op < 54) do_realloc(w, b);
        else if (op < 74) { if (b->p) retire(w, b); }
        else if (op < 79) do_aligned(w, b);
        else if (op < 82) do_usable(w, b);
        else if (op < 86) {
            if (b->p) {
                check(w, b, b->size, "pattern lost before a rewrite");
                b->version++;
                stamp_range(b, 0, b->size);
            }
        }
        else if (op < 92) hand_on(w, b);
        else if (op < 96) do_region(w, 1);
        else do_region(w, 0);
    }
    /* The thread ends with its blocks live, and in the regions it did not end. */
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz SEED [ROUNDS [OPS]]\n");
        return 2;
    }
    seed = strtoull(argv[1], NULL, 0);
    int rounds = argc > 2 ? atoi(argv[2]) : 6;
    uint64_t ops = argc > 3 ? strtoull(argv[3], NULL, 0) : 20000;
    region_begin = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    region_end = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    region_depth = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_depth");
    if (!region_begin || !region_end || !region_depth) region_begin = NULL, region_end = NULL, region_depth = NULL;

    uint64_t r = seed;
    static Worker workers[MAX_THREADS];
    static Block carried[MAX_THREADS * SLOTS];
    int ncarried = 0;
    Worker main_w = {.index = -1};
    uint64_t total_ops = 0, checked = 0, sum = 0;
    for (int round = 0; round < rounds; round++) {
        int n = 2 + (int)below(&r, MAX_THREADS - 1);
        for (int i = 0; i < n; i++) {
            Worker *w = &workers[i];
            memset(w, 0, sizeof *w);
            w->index = i;
            w->rng = mix(seed ^ ((uint64_t)round << 32) ^ (uint64_t)i);
            w->next_id = ((uint64_t)(round + 1) << 40) | ((uint64_t)i << 32);
            w->ops = ops;
            w->next = n > 1 ? &workers[(i + 1) % n] : NULL;
            pthread_mutex_init(&w->inbox.lock, NULL);
        }
        /* The blocks earlier rounds left go to this round's threads, spread over their slots. */
        for (int k = 0; k < ncarried; k++) {
            Worker *w = &workers[below(&r, (uint64_t)n)];
            Block *b = &w->slots[below(&r, SLOTS)];
            if (b->p) retire(&main_w, b);
            *b = carried[k];
        }
        ncarried = 0;
        pthread_t t[MAX_THREADS];
        for (int i = 0; i < n; i++)
            if (pthread_create(&t[i], NULL, work, &workers[i])) {
                fprintf(stderr, "fuzz: pthread_create failed\n");
                return 2;
            }
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
        /* The threads are gone and their blocks live. The main thread frees what is still on
         * the way and about half the rest, sometimes in a region of its own, and carries the
         * others into the next round. */
        int in_region = below(&r, 2) && region_begin;
        if (in_region) region_begin();
        for (int i = 0; i < n; i++) {
            Worker *w = &workers[i];
            drain(w);
            for (int s = 0; s < SLOTS; s++) {
                Block *b = &w->slots[s];
                if (!b->p) continue;
                if (below(&r, 2)) retire(w, b);
                else carried[ncarried++] = *b;
            }
            total_ops += w->ops;
            checked += w->checked;
            sum += w->sum;
            pthread_mutex_destroy(&w->inbox.lock);
        }
        if (in_region && region_end() != 0) {
            fprintf(stderr, "fuzz: SEED=%llu: the main thread's region did not end\n", (unsigned long long)seed);
            return 3;
        }
    }
    for (int k = 0; k < ncarried; k++) retire(&main_w, &carried[k]);
    checked += main_w.checked;
    sum += main_w.sum;
    printf("fuzz seed %llu: %llu operations, %llu blocks checked, checksum %016llx\n",
           (unsigned long long)seed, (unsigned long long)total_ops, (unsigned long long)checked,
           (unsigned long long)sum);
    return 0;
}
