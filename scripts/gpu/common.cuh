// common.cuh: what the CUDA programs of scripts/gpu/ share: what they do with a runtime error
// and with a machine that has no driver or no device, and the kernels that fill a block
// with a pattern and count the words that differ from it.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

// A function, so the call's result is a parameter: a macro that declared its own variable would
// shadow a caller's of the same name (CHECK(e) would test a new, uninitialised e).
static void check_rt(cudaError_t e, const char *call, int line) {
    if (e != cudaSuccess) {
        std::printf("FAIL %s: %s (line %d)\n", call, cudaGetErrorString(e), line);
        std::exit(1);
    }
}
#define CHECK(x) check_rt((x), #x, __LINE__)

// The first device call: without a driver or a device, say so in one line and exit with 3, so
// that scripts/gpu-check.sh tells "no device" from a failure.
static void need_device() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary || (e == cudaSuccess && n == 0)) {
        std::printf("NO_DEVICE cudaGetDeviceCount: %s\n", e == cudaSuccess ? "no CUDA device" : cudaGetErrorString(e));
        std::exit(3);
    }
    CHECK(e);
}

// Writes a pattern over `p[0..n)` that `v` and each word's index decide.
__global__ void fill(unsigned *p, size_t n, unsigned v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v ^ (unsigned)i;
}

// Adds to `*bad` one for each word of `p[0..n)` that differs from `fill`'s pattern for `v`.
__global__ void check(const unsigned *p, size_t n, unsigned v, unsigned *bad) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (p[i] != (v ^ (unsigned)i)) atomicAdd(bad, 1u);
}
