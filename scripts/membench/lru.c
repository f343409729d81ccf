/*
 * lru.c: one cached result per region.
 *
 * 30,000 regions (x scale); each is a region under resizealloc's markers that allocates six
 * temporaries (16 B-4 KiB, freed before the region ends) and one 100-byte result for a random
 * key out of 20,000 (x scale). The result goes into an LRU cache of 10,000 entries (x scale):
 * it replaces the key's old result (freed) or, when the cache is full, evicts the least
 * recently used one (freed). About 1 MB is live at any time. Run it in markers mode: each
 * region's result escapes it, and most die several thousand regions later in random order.
 */
#include "membench.h"

static long cap, nkeys;
static long *node_of;           /* key -> node, -1 if not cached */
static long *prev, *next, head = -1, tail = -1, used;
static uint64_t *node_key;
static void **node_val;

static void unlink_node(long n) {
    if (prev[n] >= 0) next[prev[n]] = next[n]; else head = next[n];
    if (next[n] >= 0) prev[next[n]] = prev[n]; else tail = prev[n];
}

static void push_front(long n) {
    prev[n] = -1;
    next[n] = head;
    if (head >= 0) prev[head] = n; else tail = n;
    head = n;
}

/* Stores result under key (taking ownership); frees what it replaces or evicts. */
static void put(uint64_t key, void *result, uint64_t pattern_key) {
    long n = node_of[key];
    if (n >= 0) {
        mb_check_free(node_val[n], node_key[n]);
        unlink_node(n);
    } else if (used < cap) {
        n = used++;
    } else {
        n = tail;
        unlink_node(n);
        node_of[node_key[n] >> 20] = -1; /* the pattern key holds the cache key */
        mb_check_free(node_val[n], node_key[n]);
    }
    node_of[key] = n;
    node_key[n] = pattern_key;
    node_val[n] = result;
    push_front(n);
}

int main(int argc, char **argv) {
    double scale = mb_scale(argc, argv);
    mb_init();
    cap = mb_scaled(10000, scale, 100);
    nkeys = 2 * cap;
    long regions = 3 * cap;
    node_of = malloc((size_t)nkeys * sizeof *node_of);
    prev = malloc((size_t)cap * sizeof *prev);
    next = malloc((size_t)cap * sizeof *next);
    node_key = malloc((size_t)cap * sizeof *node_key);
    node_val = malloc((size_t)cap * sizeof *node_val);
    if (!node_of || !prev || !next || !node_key || !node_val) return 2;
    for (long k = 0; k < nkeys; k++) node_of[k] = -1;
    mb_rng r = {5};
    double t0 = mb_now();
    for (long i = 0; i < regions; i++) {
        uint64_t key = mb_next(&r) % (uint64_t)nkeys;
        uint64_t pk = (key << 20) | (uint64_t)(i & 0xfffff); /* result's pattern key */
        void *tmp[6];
        uint64_t tk = ((uint64_t)i << 8) | 1;
        mb_region_begin();
        for (int k = 0; k < 3; k++) tmp[k] = mb_block(mb_log_uniform(&r, 16, 4096), tk + (uint64_t)k);
        void *result = mb_block(100, pk);
        for (int k = 3; k < 6; k++) tmp[k] = mb_block(mb_log_uniform(&r, 16, 4096), tk + (uint64_t)k);
        for (int k = 0; k < 6; k++) mb_check_free(tmp[k], tk + (uint64_t)k);
        mb_region_end();
        put(key, result, pk);
    }
    double t1 = mb_now();
    uint64_t sum = 0;
    long count = 0;
    for (long n = head; n >= 0; n = next[n]) {
        mb_check(node_val[n], node_key[n]);
        sum = sum * 31 + node_key[n];
        count++;
    }
    for (long n = head; n >= 0;) {
        long nx = next[n];
        free(node_val[n]);
        n = nx;
    }
    printf("result lru regions %ld cached %ld order_hash %llu\n", regions, count,
           (unsigned long long)sum);
    mb_metric("regions_per_s", (double)regions / (t1 - t0));
    mb_finish(mb_now() - t0);
    return 0;
}
