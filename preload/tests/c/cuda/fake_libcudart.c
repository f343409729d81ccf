/* fake_libcudart.c: a stand-in for cudart that behaves like the real one where the hooks care.
 * It opens libcuda.so.1 with RTLD_LOCAL, takes every driver entry point from
 * cuGetProcAddress_v2 (found with dlsym on that handle, as cudart >= 12 does), keeps a last
 * error for cudaGetLastError, and counts its own calls. Built as libcudart.so.12 for the
 * shared-cudart test, and compiled into the program for the static-cudart one. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

typedef int cudaError_t;
typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *cudaStream_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInitializationError = 3 };

static struct {
    CUresult (*init)(unsigned);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, void *);
    CUresult (*alloc_async_ptsz)(CUdeviceptr *, size_t, void *);
    CUresult (*free_async)(CUdeviceptr, void *);
    CUresult (*free_async_ptsz)(CUdeviceptr, void *);
    CUresult (*sync)(void);
    CUresult (*get_device)(int *);
    CUresult (*reset)(int);
    CUresult (*get_current)(void **);
    CUresult (*set_current)(void *);
    CUresult (*primary_retain)(void **, int);
    CUresult (*begin_capture)(void *, int);
    CUresult (*end_capture)(void *, void **);
    CUresult (*ipc_handle)(void *, CUdeviceptr);
} drv;
static void *primary;
static __thread int bound; /* like cudart: each thread gets the primary context on first use */
static int ready;
static cudaError_t last_error;
static long n_malloc, n_free, n_malloc_async, n_free_async, n_sync, n_reset;

void fake_cudart_counts(long out[6]) {
    out[0] = n_malloc; out[1] = n_free; out[2] = n_malloc_async; out[3] = n_free_async; out[4] = n_sync; out[5] = n_reset;
}

/* The driver's CUresult values used here equal the runtime's cudaError_t values. */
static cudaError_t record(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

static cudaError_t lazy_init(void) {
    if (ready) return cudaSuccess;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return cudaErrorInitializationError;
    typedef CUresult (*proc_fn)(const char *, void **, int, uint64_t, int *);
    proc_fn gpa = (proc_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) return cudaErrorInitializationError;
    const int v = 12000;
    int bad = 0;
    bad |= gpa("cuInit", (void **)&drv.init, v, 0, NULL);
    bad |= gpa("cuMemAlloc", (void **)&drv.alloc, v, 0, NULL);
    bad |= gpa("cuMemFree", (void **)&drv.free, v, 0, NULL);
    bad |= gpa("cuMemAllocAsync", (void **)&drv.alloc_async, v, 0, NULL);
    bad |= gpa("cuMemAllocAsync", (void **)&drv.alloc_async_ptsz, v, 2, NULL);
    bad |= gpa("cuMemFreeAsync", (void **)&drv.free_async, v, 0, NULL);
    bad |= gpa("cuMemFreeAsync", (void **)&drv.free_async_ptsz, v, 2, NULL);
    bad |= gpa("cuCtxSynchronize", (void **)&drv.sync, v, 0, NULL);
    bad |= gpa("cuCtxGetDevice", (void **)&drv.get_device, v, 0, NULL);
    bad |= gpa("cuDevicePrimaryCtxReset", (void **)&drv.reset, v, 0, NULL);
    bad |= gpa("cuCtxGetCurrent", (void **)&drv.get_current, v, 0, NULL);
    bad |= gpa("cuCtxSetCurrent", (void **)&drv.set_current, v, 0, NULL);
    bad |= gpa("cuDevicePrimaryCtxRetain", (void **)&drv.primary_retain, v, 0, NULL);
    bad |= gpa("cuStreamBeginCapture", (void **)&drv.begin_capture, v, 0, NULL);
    bad |= gpa("cuStreamEndCapture", (void **)&drv.end_capture, v, 0, NULL);
    bad |= gpa("cuIpcGetMemHandle", (void **)&drv.ipc_handle, v, 0, NULL);
    if (bad || drv.init(0) != 0) return cudaErrorInitializationError;
    if (drv.get_current(&primary) != 0 || !primary) return cudaErrorInitializationError;
    ready = 1;
    bound = 1;
    return cudaSuccess;
}

static cudaError_t thread_init(void) {
    cudaError_t e = lazy_init();
    if (e || bound) return e;
    void *c = NULL;
    drv.get_current(&c);
    if (!c) drv.set_current(primary);
    bound = 1;
    return cudaSuccess;
}
#define lazy_init thread_init

cudaError_t cudaMalloc(void **p, size_t n) {
    n_malloc++;
    cudaError_t e = lazy_init();
    if (e) return record(e);
    if (!p) return record(cudaErrorInvalidValue);
    if (n == 0) { *p = NULL; return cudaSuccess; }
    CUdeviceptr d = 0;
    e = drv.alloc(&d, n);
    if (e) return record(e);
    *p = (void *)(uintptr_t)d;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    n_free++;
    cudaError_t e = lazy_init();
    if (e) return record(e);
    if (!p) return cudaSuccess;
    return record(drv.free((CUdeviceptr)(uintptr_t)p));
}

static cudaError_t malloc_async(void **p, size_t n, cudaStream_t s, int ptsz) {
    n_malloc_async++;
    cudaError_t e = lazy_init();
    if (e) return record(e);
    if (!p) return record(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    e = (ptsz ? drv.alloc_async_ptsz : drv.alloc_async)(&d, n, s);
    if (e) return record(e);
    *p = (void *)(uintptr_t)d;
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) { return malloc_async(p, n, s, 0); }
cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s) { return malloc_async(p, n, s, 1); }

cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    n_free_async++;
    cudaError_t e = lazy_init();
    return e ? record(e) : record(drv.free_async((CUdeviceptr)(uintptr_t)p, s));
}
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s) {
    n_free_async++;
    cudaError_t e = lazy_init();
    return e ? record(e) : record(drv.free_async_ptsz((CUdeviceptr)(uintptr_t)p, s));
}

cudaError_t cudaDeviceSynchronize(void) {
    n_sync++;
    cudaError_t e = lazy_init();
    return e ? record(e) : record(drv.sync());
}

cudaError_t cudaDeviceReset(void) {
    n_reset++;
    cudaError_t e = lazy_init();
    if (e) return record(e);
    int dev = 0;
    e = drv.get_device(&dev);
    return e ? record(e) : record(drv.reset(dev));
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode) {
    cudaError_t e = lazy_init();
    return e ? record(e) : record(drv.begin_capture(s, mode));
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, void **graph) {
    cudaError_t e = lazy_init();
    return e ? record(e) : record(drv.end_capture(s, graph));
}
cudaError_t cudaIpcGetMemHandle(void *handle, void *p) {
    cudaError_t e = lazy_init();
    return e ? record(e) : record(drv.ipc_handle(handle, (CUdeviceptr)(uintptr_t)p));
}
