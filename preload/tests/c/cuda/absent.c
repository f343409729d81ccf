/* absent: a process without any CUDA driver or runtime, under the library. Probes for CUDA by
 * symbol must not be misled, and a program that reaches the hooks anyway must get what a real
 * cudart (and driver API) answers on a machine without a driver.
 *
 * Prints one line per probe ("dlsym <name> absent|present"), which the test compares with the
 * run without the library, then checks the codes of the hooks, reached through weak references
 * (bound at load time, so they do see the library's exports):
 *   runtime calls                    cudaErrorInsufficientDriver (35)
 *   driver calls before cuInit       CUDA_ERROR_NOT_INITIALIZED (3)
 *   cuInit                           CUDA_ERROR_NO_DEVICE (100)
 *   driver calls after cuInit        CUDA_ERROR_NO_DEVICE (100)
 * Ends with "all ok". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *CUstream;

/* Weak: null without the library. */
extern int cudaMalloc(void **, size_t) __attribute__((weak));
extern int cudaFree(void *) __attribute__((weak));
extern int cudaMallocAsync(void **, size_t, CUstream) __attribute__((weak));
extern int cudaFreeAsync(void *, CUstream) __attribute__((weak));
extern int cudaDeviceSynchronize(void) __attribute__((weak));
extern int cudaDeviceReset(void) __attribute__((weak));
extern CUresult cuInit(unsigned) __attribute__((weak));
extern CUresult cuMemAlloc_v2(CUdeviceptr *, size_t) __attribute__((weak));
extern CUresult cuMemFree_v2(CUdeviceptr) __attribute__((weak));
extern CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream) __attribute__((weak));
extern CUresult cuCtxSynchronize(void) __attribute__((weak));
extern CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr) __attribute__((weak));
extern CUresult cuPointerGetAttribute(void *, int, CUdeviceptr) __attribute__((weak));
extern CUresult cuGetProcAddress(const char *, void **, int, uint64_t) __attribute__((weak));
extern CUresult cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *) __attribute__((weak));

static int failures;
#define CODE(call, want)                                                                           \
    do {                                                                                           \
        int got_ = (call);                                                                         \
        if (got_ != (want)) {                                                                      \
            printf("FAIL: %s = %d, want %d\n", #call, got_, (want));                               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static const char *const PROBES[] = {
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync_ptsz", "cudaDeviceSynchronize",
    "cudaDeviceReset", "cuInit", "cuGetProcAddress", "cuGetProcAddress_v2", "cuMemAlloc_v2",
    "cuMemFree_v2", "cuMemAllocAsync", "cuCtxSynchronize", "cuPointerGetAttribute",
    "cuMemAllocFromPoolAsync",
};

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    void *self = dlopen(NULL, RTLD_LAZY);
    for (unsigned i = 0; i < sizeof PROBES / sizeof *PROBES; i++) {
        void *p = dlsym(RTLD_DEFAULT, PROBES[i]);
        const char *err = p ? NULL : dlerror();
        printf("dlsym %s %s%s\n", PROBES[i], p ? "present" : "absent",
               p || (err && strstr(err, PROBES[i])) ? "" : " (no dlerror naming it)");
        printf("dlsym(self) %s %s\n", PROBES[i], dlsym(self, PROBES[i]) ? "present" : "absent");
    }
    if (!cudaMalloc) { /* plain run: nothing to call */
        printf("all ok\n");
        return 0;
    }
    /* The runtime, as a real cudart answers without a driver. */
    void *p = (void *)0x1;
    CODE(cudaMalloc(&p, 1 << 20), 35);
    CODE(cudaFree(NULL), 35);
    CODE(cudaFree((void *)0x1000), 35);
    CODE(cudaMallocAsync(&p, 4096, NULL), 35);
    CODE(cudaFreeAsync((void *)0x1000, NULL), 35);
    CODE(cudaDeviceSynchronize(), 35);
    CODE(cudaDeviceReset(), 35);
    /* The driver API before cuInit. */
    CUdeviceptr d = 0;
    void *fn = NULL;
    int status = 0;
    CODE(cuMemAlloc_v2(&d, 4096), 3);
    CODE(cuMemFree_v2(0x1000), 3);
    CODE(cuMemAllocAsync(&d, 4096, NULL), 3);
    CODE(cuCtxSynchronize(), 3);
    CODE(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0), 3);
    CODE(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &status), 3);
    /* cuInit finds no device; every later call says so. */
    if (!cuInit) {
        printf("FAIL: cuInit is not exported\n");
        return 1;
    }
    CODE(cuInit(0), 100);
    CODE(cuInit(0), 100);
    CODE(cuMemAlloc_v2(&d, 4096), 100);
    CODE(cuMemFree_v2(0x1000), 100);
    CODE(cuMemAllocAsync(&d, 4096, NULL), 100);
    CODE(cuCtxSynchronize(), 100);
    size_t size = 0;
    CODE(cuMemGetAddressRange_v2(&d, &size, 0x1000), 100);
    CODE(cuPointerGetAttribute(&size, 12, 0x1000), 100);
    CODE(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0), 100);
    CODE(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &status), 100);
    /* The runtime still answers as without a driver. */
    CODE(cudaMalloc(&p, 1 << 20), 35);
    if (failures) return 1;
    printf("all ok\n");
    return 0;
}
