/* Identity and sharing of pool blocks against fake_libcuda.c: a block freed on a stream of
 * another context is reused only after that context synchronised; cuIpcGetMemHandle on a pool
 * block fails clearly (a handle would describe the whole segment, while the address range is
 * the block's), through the driver and through cudart; CU_POINTER_ATTRIBUTE_BUFFER_ID differs
 * for every block handed out, also when an address is reused. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
CUresult cuInit(unsigned);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, void *);
CUresult cuMemFreeAsync(CUdeviceptr, void *);
CUresult cuCtxSynchronize(void);
CUresult cuCtxPushCurrent_v2(void *);
CUresult cuCtxPopCurrent_v2(void **);
CUresult cuIpcGetMemHandle(void *, CUdeviceptr);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuPointerGetAttributes(unsigned, int *, void **, CUdeviceptr);
void *fake_cuda_context(int which);
typedef int cudaError_t;
cudaError_t cudaIpcGetMemHandle(void *, void *);
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);

static int failures;
#define CHECK(c, what) do { if (c) printf("ok %s\n", what); else { printf("FAIL %s (line %d)\n", what, __LINE__); failures++; } } while (0)
#define OTHER_STREAM ((void *)0x99) /* a stream of the fake's second context */
#define MY_STREAM ((void *)0x40)
enum { BUFFER_ID = 7, NOT_SUPPORTED = 801 };

int main(void) {
    void (*region_begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    if (!region_begin) { puts("FAIL libresizealloc.so not preloaded"); return 1; }
    CHECK(cuInit(0) == 0, "cuInit");
    region_begin();

    /* Cross-context: a block of context 0 freed on a stream of context 1. */
    CUdeviceptr a = 0, b = 0, c = 0, d = 0;
    CHECK(cuMemAllocAsync(&a, 4096, MY_STREAM) == 0, "block of context 0");
    CHECK(cuMemFreeAsync(a, OTHER_STREAM) == 0, "freed on a stream of context 1");
    CHECK(cuCtxSynchronize() == 0, "context 0 synchronises");
    CHECK(cuMemAllocAsync(&b, 4096, MY_STREAM) == 0 && b != a, "not reused after a sync of context 0 alone");
    CHECK(cuMemAlloc_v2(&c, 4096) == 0 && c != a, "not even by a synchronous allocation");
    CHECK(cuCtxPushCurrent_v2(fake_cuda_context(1)) == 0 && cuCtxSynchronize() == 0 && cuCtxPopCurrent_v2(NULL) == 0, "context 1 synchronises");
    CHECK(cuMemAllocAsync(&d, 4096, MY_STREAM) == 0 && d == a, "reused after context 1's sync covered the free");
    cuMemFreeAsync(b, MY_STREAM);
    cuMemFreeAsync(d, MY_STREAM);
    cuMemFree_v2(c);
    cuCtxSynchronize();

    /* IPC: a pool block fails clearly; the address range stays the block's. */
    unsigned char handle[64];
    CUdeviceptr p = 0, base = 0;
    size_t size = 0;
    CHECK(cuMemAlloc_v2(&p, 3000) == 0, "pool block");
    CHECK(cuIpcGetMemHandle(handle, p) == NOT_SUPPORTED, "cuIpcGetMemHandle on a pool block -> CUDA_ERROR_NOT_SUPPORTED");
    CHECK(cuIpcGetMemHandle(handle, p + 100) == NOT_SUPPORTED, "also inside the block");
    CHECK(cuMemGetAddressRange_v2(&base, &size, p + 100) == 0 && base == p && size == 3072, "the address range is the block");
    void *rp = NULL;
    CHECK(cudaMalloc(&rp, 5000) == 0, "cudaMalloc pool block");
    CHECK(cudaIpcGetMemHandle(handle, rp) == NOT_SUPPORTED, "cudaIpcGetMemHandle on a pool block -> cudaErrorNotSupported");
    cudaFree(rp);
    /* Outside regions (the workaround): the driver's own allocation, the driver's handle. */
    int (*region_end)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    region_end();
    CUdeviceptr shared = 0;
    CHECK(cuMemAlloc_v2(&shared, 3000) == 0 && cuIpcGetMemHandle(handle, shared + 8) == 0, "outside regions the driver's handle");
    CUdeviceptr named = 0;
    memcpy(&named, handle, sizeof named);
    CHECK(named == shared, "and it names the allocation the address range gives");
    cuMemFree_v2(shared);
    region_begin();

    /* Buffer ids: distinct for every handout, also at a reused address. */
    uint64_t ids[64];
    int distinct = 1, reused_address = 0;
    CUdeviceptr first = 0;
    for (int i = 0; i < 64; i++) {
        CUdeviceptr q = 0;
        cuMemAlloc_v2(&q, 4096);
        if (i == 0) first = q; else if (q == first) reused_address = 1;
        CHECK(cuPointerGetAttribute(&ids[i], BUFFER_ID, q + 10) == 0, "buffer id");
        for (int j = 0; j < i; j++) if (ids[j] == ids[i]) distinct = 0;
        int attrs[1] = {BUFFER_ID};
        uint64_t id2 = 0;
        void *data[1] = {&id2};
        if (cuPointerGetAttributes(1, attrs, data, q) != 0 || id2 != ids[i]) distinct = 0;
        cuMemFree_v2(q);
        cuCtxSynchronize();
    }
    CHECK(reused_address, "the pool reused the address");
    CHECK(distinct, "every block got its own buffer id (cuPointerGetAttribute and cuPointerGetAttributes agree)");
    CHECK(cuMemFree_v2(p) == 0, "free");

    if (failures) { printf("%d failures\n", failures); return 1; }
    puts("all ok");
    return 0;
}
