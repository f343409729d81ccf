// alloc_bench.cu: cudaMalloc/cudaFree costs and correctness, with or without libresizealloc.so.
// Built twice by scripts/gpu-check.sh (shared and static cudart). Run it plainly, then with
// LD_PRELOAD=libresizealloc.so RESIZEALLOC_REGION=process: kernels must write and read back the
// pooled memory correctly, and the timings go side by side.
// Output: "RESULT <name> <value> <unit>" lines; exit status 1 on a wrong result, 3 (and a
// "NO_DEVICE" line) when there is no driver or no device.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "common.cuh"

static double now_ns() {
    return (double)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
    need_device();
    CHECK(cudaFree(0)); // create the context outside the timings
    unsigned *bad;
    CHECK(cudaMalloc(&bad, sizeof(unsigned)));

    // 1. Correctness: many live blocks of mixed sizes, written by kernels, checked by kernels,
    //    freed in a scrambled order, over several synchronised rounds.
    for (int round = 0; round < 20; round++) {
        std::vector<unsigned *> blocks;
        std::vector<size_t> counts;
        for (int i = 0; i < 64; i++) {
            size_t n = (size_t)64 << (i % 14);
            unsigned *p;
            CHECK(cudaMalloc(&p, n * sizeof(unsigned)));
            fill<<<64, 256>>>(p, n, round * 131 + i);
            blocks.push_back(p);
            counts.push_back(n);
        }
        CHECK(cudaMemset(bad, 0, sizeof(unsigned)));
        for (int i = 0; i < 64; i++) check<<<64, 256>>>(blocks[i], counts[i], round * 131 + i, bad);
        unsigned h_bad = 0;
        CHECK(cudaMemcpy(&h_bad, bad, sizeof h_bad, cudaMemcpyDeviceToHost));
        if (h_bad) { std::printf("FAIL round %d: %u wrong words\n", round, h_bad); return 1; }
        for (int i = 0; i < 64; i++) CHECK(cudaFree(blocks[(i * 37) % 64]));
        CHECK(cudaDeviceSynchronize());
    }
    std::printf("RESULT correctness 1 ok\n");

    // 2. A cudaMalloc(10) + cudaFree pair, host time.
    double t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        void *p;
        CHECK(cudaMalloc(&p, 10));
        CHECK(cudaFree(p));
    }
    std::printf("RESULT pair_10B %.1f ns\n", (now_ns() - t0) / iters);

    // 3. alloc + free + cudaDeviceSynchronize, against a bare sync, for 10 B, 1 MiB and 64 MiB.
    int loops = iters / 4;
    t0 = now_ns();
    for (int i = 0; i < loops; i++) CHECK(cudaDeviceSynchronize());
    double bare = (now_ns() - t0) / loops;
    std::printf("RESULT bare_sync %.1f ns\n", bare);
    const size_t sizes[] = {10, (size_t)1 << 20, (size_t)64 << 20};
    const char *names[] = {"10B", "1MiB", "64MiB"};
    for (int s = 0; s < 3; s++) {
        t0 = now_ns();
        for (int i = 0; i < loops; i++) {
            void *p;
            CHECK(cudaMalloc(&p, sizes[s]));
            CHECK(cudaFree(p));
            CHECK(cudaDeviceSynchronize());
        }
        double t = (now_ns() - t0) / loops;
        std::printf("RESULT alloc_free_sync_%s %.1f ns\n", names[s], t);
        std::printf("RESULT alloc_free_sync_%s_vs_bare %.3f x\n", names[s], t / bare);
    }

    // 4. Stream-ordered allocation.
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st));
    t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        void *p;
        CHECK(cudaMallocAsync(&p, 4096, st));
        CHECK(cudaFreeAsync(p, st));
    }
    CHECK(cudaStreamSynchronize(st));
    std::printf("RESULT async_pair_4KiB %.1f ns\n", (now_ns() - t0) / iters);
    CHECK(cudaFree(bad));
    return 0;
}
