// capture_ipc_pressure.cu: what real GPU programs do that the fakes only imitate, for
// scripts/gpu-check.sh. Run it plainly and under LD_PRELOAD=libresizealloc.so.
//
//   capture_ipc_pressure capture global|relaxed   graph capture, then replays after the pool reused memory
//   capture_ipc_pressure ipc <file>               a block shared with a child process (cudaIpcGetMemHandle)
//   capture_ipc_pressure ipc-child <file>         the child: opens the handle and checks the bytes
//   capture_ipc_pressure pressure                 cuMemCreate of 60% of the device after the pool cached 60%
//
// Output: "RESULT <name> <value> <unit>" lines; exit status 1 on a wrong result, 3 (and a
// "NO_DEVICE" line) when there is no driver or no device.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <unistd.h>
#include <sys/wait.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include "common.cuh"

// As check_rt (common.cuh), for the driver API.
static void check_cu(CUresult e, const char *call, int line) {
    if (e != CUDA_SUCCESS) {
        std::printf("FAIL %s: CUresult %d (line %d)\n", call, (int)e, line);
        std::exit(1);
    }
}
#define CHECK_CU(x) check_cu((x), #x, __LINE__)

__global__ void copy(const unsigned *s, unsigned *d, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        d[i] = s[i];
}
static double now_us() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count() / 1e3;
}

static unsigned wrong_words(const unsigned *p, size_t n, unsigned v, unsigned *bad) {
    CHECK(cudaMemset(bad, 0, sizeof(unsigned)));
    check<<<128, 256>>>(p, n, v, bad);
    unsigned h = 0;
    CHECK(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
    return h;
}

// A graph that allocates, writes, copies out and frees a temporary; between replays the
// program allocates and writes pool memory. If the captured allocation had come from the pool
// (a plain address, no memory node), a replay would write into blocks handed out since.
static int capture(bool relaxed) {
    const size_t n = 1 << 20;
    unsigned *bad, *out;
    CHECK(cudaMalloc(&bad, sizeof(unsigned)));
    CHECK(cudaMalloc(&out, n * sizeof(unsigned)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // Frees in flight: a pool that synchronised itself during the capture would invalidate it.
    for (int i = 0; i < 32; i++) {
        void *x;
        CHECK(cudaMalloc(&x, 1 << 20));
        CHECK(cudaFree(x));
    }
    CHECK(cudaStreamBeginCapture(s, relaxed ? cudaStreamCaptureModeRelaxed : cudaStreamCaptureModeGlobal));
    unsigned *tmp;
    CHECK(cudaMallocAsync((void **)&tmp, n * sizeof(unsigned), s));
    fill<<<128, 256, 0, s>>>(tmp, n, 0x1234);
    copy<<<128, 256, 0, s>>>(tmp, out, n);
    CHECK(cudaFreeAsync(tmp, s));
    void *y = nullptr;
    if (relaxed) // cudaMalloc is legal in relaxed mode only; the pool must serve it without a sync
        CHECK(cudaMalloc(&y, 3 << 20));
    cudaGraph_t graph;
    CHECK(cudaStreamEndCapture(s, &graph)); // fails if anything invalidated the capture
    if (y) CHECK(cudaFree(y));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<unsigned *> blocks;
    for (int i = 0; i < 16; i++) {
        unsigned *b;
        CHECK(cudaMalloc(&b, n * sizeof(unsigned)));
        fill<<<128, 256>>>(b, n, 7u + i);
        blocks.push_back(b);
    }
    CHECK(cudaDeviceSynchronize());
    double t0 = now_us();
    const int replays = 200;
    for (int r = 0; r < replays; r++) CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    double per = (now_us() - t0) / replays;
    unsigned wrong = wrong_words(out, n, 0x1234, bad);
    for (int i = 0; i < 16; i++) wrong += wrong_words(blocks[i], n, 7u + i, bad);
    for (auto b : blocks) CHECK(cudaFree(b));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaDeviceSynchronize());
    std::printf("RESULT capture_%s_replay %.1f us\n", relaxed ? "relaxed" : "global", per);
    if (wrong) { std::printf("FAIL capture: %u wrong words after replays\n", wrong); return 1; }
    std::printf("RESULT capture_%s_correct 1 ok\n", relaxed ? "relaxed" : "global");
    return 0;
}

static int ipc(const char *file, const char *self) {
    const size_t n = 1 << 18;
    unsigned *p, *bad;
    CHECK(cudaMalloc(&bad, sizeof(unsigned)));
    CHECK(cudaMalloc(&p, n * sizeof(unsigned)));
    fill<<<128, 256>>>(p, n, 0xabcd);
    CHECK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, p);
    if (e == cudaErrorNotSupported) {
        cudaGetLastError();
        std::printf("RESULT ipc_pool_block refused (cudaErrorNotSupported: allocate shared memory outside regions)\n");
        return 0;
    }
    check_rt(e, "cudaIpcGetMemHandle(&h, p)", __LINE__);
    FILE *f = std::fopen(file, "wb");
    std::fwrite(&h, sizeof h, 1, f);
    std::fclose(f);
    double t0 = now_us();
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "ipc-child", file, (char *)nullptr);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::printf("RESULT ipc_child %.0f us\n", now_us() - t0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { std::printf("FAIL ipc: the child read wrong bytes\n"); return 1; }
    std::printf("RESULT ipc_correct 1 ok\n");
    return 0;
}

static int ipc_child(const char *file) {
    cudaIpcMemHandle_t h;
    FILE *f = std::fopen(file, "rb");
    if (!f || std::fread(&h, sizeof h, 1, f) != 1) return 2;
    std::fclose(f);
    unsigned *p, *bad;
    CHECK(cudaMalloc(&bad, sizeof(unsigned)));
    CHECK(cudaIpcOpenMemHandle((void **)&p, h, cudaIpcMemLazyEnablePeerAccess));
    unsigned wrong = wrong_words(p, 1 << 18, 0xabcd, bad);
    CHECK(cudaIpcCloseMemHandle(p));
    return wrong ? 1 : 0;
}

// The pool caches 60% of the device; cuMemCreate (the expandable-segments route) then asks for
// 60%: it succeeds only if the pool gives its cache back.
static int pressure() {
    size_t free_b = 0, total = 0;
    CHECK(cudaFree(0));
    CHECK(cudaMemGetInfo(&free_b, &total));
    CUdevice dev;
    CHECK_CU(cuCtxGetDevice(&dev));
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t big = (size_t)(free_b * 0.6) / gran * gran;
    void *p;
    CHECK(cudaMalloc(&p, big));
    CHECK(cudaFree(p));
    CHECK(cudaDeviceSynchronize());
    size_t free_after = 0;
    CHECK(cudaMemGetInfo(&free_after, &total));
    std::printf("RESULT pressure_free_after_cache %.1f GiB\n", free_after / 1073741824.0);
    double t0 = now_us();
    CUmemGenericAllocationHandle h;
    CUresult r = cuMemCreate(&h, big, &prop, 0);
    double dt = now_us() - t0;
    if (r != CUDA_SUCCESS) { std::printf("FAIL pressure: cuMemCreate of %.1f GiB: CUresult %d\n", big / 1073741824.0, (int)r); return 1; }
    std::printf("RESULT pressure_cuMemCreate %.0f us\n", dt);
    CHECK_CU(cuMemRelease(h));
    std::printf("RESULT pressure_correct 1 ok\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { std::printf("usage: %s capture global|relaxed | ipc FILE | pressure\n", argv[0]); return 2; }
    std::string mode = argv[1];
    need_device();
    if (mode == "capture") return capture(argc > 2 && !std::strcmp(argv[2], "relaxed"));
    if (mode == "ipc") return ipc(argc > 2 ? argv[2] : "/tmp/resize-ipc", argv[0]);
    if (mode == "ipc-child") return ipc_child(argv[2]);
    if (mode == "pressure") return pressure();
    return 2;
}
