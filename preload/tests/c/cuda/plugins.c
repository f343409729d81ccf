/* The plug-in entry points, called the way PyTorch (CUDAPluggableAllocator), CuPy
 * (CFunctionAllocator), cuda.core and Numba call them: libresizealloc.so opened with dlopen
 * (RTLD_LOCAL, as ctypes does), not preloaded, and this program not linked with the driver:
 * the library finds and initialises libcuda.so.1 (the fake, on LD_LIBRARY_PATH) itself.
 * Usage: plugins /path/to/libresizealloc.so [off] */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

static int failures;
#define CHECK(c, what) do { if (c) printf("ok %s\n", what); else { printf("FAIL %s (line %d)\n", what, __LINE__); failures++; } } while (0)

static void *(*torch_alloc)(ssize_t, int, void *);
static void (*torch_free)(void *, ssize_t, int, void *);
static void *(*cupy_malloc)(void *, size_t, int);
static void (*cupy_free)(void *, void *, int);
static int (*dev_alloc)(size_t, int, void *, void **);
static int (*dev_free)(void *, size_t, int, void *);
struct cuda_stats { uint64_t pools, reserved, in_use, high_water, overflow_blocks, segments, own_syncs, observed_syncs, driver_allocs, pressure_releases, capture_refusals; };
static int (*stats_get)(struct cuda_stats *, size_t);
static long (*fake_count)(const char *);
static void *(*fake_block_ctx)(uint64_t);
static void *(*fake_context)(int);
static int (*begin_capture)(void *, int);
static int (*end_capture)(void *, void **);
static struct cuda_stats stats(void) { struct cuda_stats s; memset(&s, 0, sizeof s); stats_get(&s, sizeof s); return s; }
#define STREAM ((void *)0x33)

static void *other_thread(void *arg) {
    (void)arg; /* no context is current here: the device's primary context serves */
    void *p = torch_alloc(4096, 0, STREAM);
    int ok = p && fake_block_ctx((uint64_t)(uintptr_t)p) == fake_context(0);
    if (p) torch_free(p, 4096, 0, STREAM);
    return (void *)(intptr_t)ok;
}

int main(int argc, char **argv) {
    int off = argc > 2 && !strcmp(argv[2], "off");
    CHECK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL, "the driver is not loaded before the library needs it");
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { printf("FAIL dlopen: %s\n", dlerror()); return 1; }
    CHECK(dlsym(RTLD_DEFAULT, "resize_torch_alloc") == NULL, "not preloaded: the library is local");
    torch_alloc = (void *(*)(ssize_t, int, void *))dlsym(lib, "resize_torch_alloc");
    torch_free = (void (*)(void *, ssize_t, int, void *))dlsym(lib, "resize_torch_free");
    cupy_malloc = (void *(*)(void *, size_t, int))dlsym(lib, "resize_cupy_malloc");
    cupy_free = (void (*)(void *, void *, int))dlsym(lib, "resize_cupy_free");
    dev_alloc = (int (*)(size_t, int, void *, void **))dlsym(lib, "resize_device_allocate");
    dev_free = (int (*)(void *, size_t, int, void *))dlsym(lib, "resize_device_deallocate");
    stats_get = (int (*)(struct cuda_stats *, size_t))dlsym(lib, "resize_cuda_stats_get");
    CHECK(torch_alloc && torch_free && cupy_malloc && cupy_free && dev_alloc && dev_free && stats_get, "every entry point is exported");
    if (failures) return 1;

    /* PyTorch. */
    void *p = torch_alloc(1000, 0, STREAM);
    CHECK(p != NULL, "resize_torch_alloc");
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(cuda != NULL, "the library opened the driver itself");
    fake_count = (long (*)(const char *))dlsym(cuda, "fake_cuda_count");
    fake_block_ctx = (void *(*)(uint64_t))dlsym(cuda, "fake_cuda_block_ctx");
    fake_context = (void *(*)(int))dlsym(cuda, "fake_cuda_context");
    begin_capture = (int (*)(void *, int))dlsym(cuda, "cuStreamBeginCapture_v2");
    end_capture = (int (*)(void *, void **))dlsym(cuda, "cuStreamEndCapture");
    memset(p, 7, 1000); /* fake device memory is host memory */
    torch_free(p, 1000, 0, STREAM);
    void *q = torch_alloc(1000, 0, STREAM);
    if (!off) CHECK(q == p, "torch: a block freed on a stream is reused at once on it");
    torch_free(q, 1000, 0, STREAM);
    long allocs = fake_count("allocs");
    for (int i = 0; i < 10000; i++) {
        void *b = torch_alloc(512 + (i % 7) * 1024, 0, STREAM);
        if (!b) { CHECK(0, "torch alloc in the loop"); break; }
        torch_free(b, 512 + (i % 7) * 1024, 0, STREAM);
    }
    if (!off) CHECK(fake_count("allocs") == allocs && stats().pools == 1, "torch: 10000 pairs served by the pool");
    CHECK(torch_alloc(-1, 0, STREAM) == NULL, "torch: negative size -> NULL");
    CHECK(torch_alloc(100, 99, STREAM) == NULL && torch_alloc(100, -1, STREAM) == NULL, "torch: unknown device -> NULL");
    torch_free(NULL, 0, 0, STREAM);
    void *t_ok = NULL;
    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, &t_ok);
    CHECK(t_ok != NULL, "torch: a thread without a current context gets the device's primary context");

    /* CuPy. */
    void *m = cupy_malloc(NULL, 5000, 0);
    CHECK(m != NULL, "resize_cupy_malloc");
    memset(m, 1, 5000);
    cupy_free(NULL, m, 0);
    void *m2 = cupy_malloc(NULL, 5000, 0);
    if (!off) CHECK(m2 != m, "cupy: not stream-ordered, so not reused before a synchronisation");
    cupy_free(NULL, m2, 0);
    allocs = fake_count("allocs");
    long syncs = fake_count("syncs");
    for (int i = 0; i < 10000; i++) {
        void *b = cupy_malloc(NULL, 10, 0);
        if (!b) { CHECK(0, "cupy malloc in the loop"); break; }
        cupy_free(NULL, b, 0);
    }
    if (!off) CHECK(fake_count("allocs") - allocs <= 1 && fake_count("syncs") - syncs <= 3, "cupy: 10000 pairs, one sync per batch of frees");
    CHECK(cupy_malloc(NULL, 10, 42) == NULL, "cupy: unknown device -> NULL");
    cupy_free(NULL, NULL, 0);

    /* cuda.core / Numba. */
    void *out = NULL;
    CHECK(dev_alloc(10, 0, STREAM, &out) == 0 && out != NULL, "resize_device_allocate");
    CHECK(dev_free(out, 10, 0, STREAM) == 0, "resize_device_deallocate");
    CHECK(dev_alloc(10, 0, STREAM, NULL) == 1, "NULL out -> CUDA_ERROR_INVALID_VALUE");
    CHECK(dev_alloc(10, 77, STREAM, &out) == 101 && dev_alloc(10, -3, STREAM, &out) == 101, "unknown device -> CUDA_ERROR_INVALID_DEVICE");
    CHECK(dev_alloc(0, 0, STREAM, &out) == 0 && out == NULL, "size 0 -> NULL, success");
    CHECK(dev_free(NULL, 0, 0, STREAM) == 0, "deallocate NULL -> success");
    CHECK(dev_free((void *)0x1234, 8, 0, STREAM) == 1, "deallocate a pointer that is no block -> CUDA_ERROR_INVALID_VALUE");
    CHECK(dev_free(out, 8, 9999, STREAM) == 101, "deallocate on an unknown device -> CUDA_ERROR_INVALID_DEVICE");
    allocs = fake_count("allocs");
    for (int i = 0; i < 10000; i++) {
        if (dev_alloc(10, 0, STREAM, &out) || dev_free(out, 10, 0, STREAM)) { CHECK(0, "allocate loop"); break; }
    }
    if (!off) CHECK(fake_count("allocs") == allocs, "cuda.core: allocate(10) loop served by the pool");
    CHECK(dev_alloc((size_t)1 << 40, 0, STREAM, &out) == 2, "more than the device has -> CUDA_ERROR_OUT_OF_MEMORY");
    /* During a stream capture the driver serves (the graph gets its memory node). */
    CHECK(begin_capture(STREAM, 0) == 0, "capture begins");
    long graph = fake_count("graph_allocs");
    uint64_t in_use = stats().in_use;
    CHECK(dev_alloc(4096, 0, STREAM, &out) == 0 && fake_count("graph_allocs") == graph + 1 && stats().in_use == in_use, "captured allocation goes to the driver");
    CHECK(dev_free(out, 4096, 0, STREAM) == 0, "and its free");
    void *tp = torch_alloc(4096, 0, STREAM);
    CHECK(tp && fake_count("graph_allocs") == graph + 2, "torch during capture: the driver too");
    torch_free(tp, 4096, 0, STREAM);
    CHECK(end_capture(STREAM, NULL) == 0 && fake_count("illegal") == 0, "capture ends valid, nothing illegal");
    if (off) CHECK(stats().pools == 0, "off: no pool");

    if (failures) { printf("%d failures\n", failures); return 1; }
    puts("all ok");
    return 0;
}
