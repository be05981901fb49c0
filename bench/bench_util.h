// What the benchmark programs share: fatal checks of CUDA and mfact calls (a benchmark
// stops at the first failure, with the call and its message), and a seeded hash for
// synthetic data.
#ifndef MFACT_BENCH_UTIL_H
#define MFACT_BENCH_UTIL_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "mfact/mfact.h"

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define MF_CHECK(ctx, call)                                                                        \
    do {                                                                                           \
        if ((call) != MF_OK) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, mf_ctx_last_error(ctx)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// splitmix64's finalizer: a well-mixed 64-bit hash of z (host and device).
static inline __host__ __device__ uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// "32,128,512" as integers (--k lists). Anything else (an empty item, "12x", a value beyond
// int) ends the program with status 2: a typo must not quietly measure another list.
static inline std::vector<int> parse_ints(const char *s)
{
    std::vector<int> v;
    for (const char *p = s;;) {
        char *end = NULL;
        long x = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || x < INT32_MIN || x > INT32_MAX) {
            fprintf(stderr, "'%s': not a comma-separated list of integers\n", s);
            exit(2);
        }
        v.push_back((int)x);
        if (!*end)
            return v;
        p = end + 1;
    }
}

// The median of v (the upper one for an even count).
template <typename T> static inline T bench_median(std::vector<T> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Device copy bandwidth (bytes read + written per second): the median of 7 device-to-device
// copies of 1 GiB on stream st, timed with events.
static inline double bench_copy_bandwidth(cudaStream_t st)
{
    const size_t bytes = (size_t)1 << 30;
    void *a, *b;
    CUDA_CHECK(cudaMalloc(&a, bytes));
    CUDA_CHECK(cudaMalloc(&b, bytes));
    CUDA_CHECK(cudaMemsetAsync(a, 1, bytes, st));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < 7; r++) {
        CUDA_CHECK(cudaEventRecord(e0, st));
        CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    return 2.0 * bytes / (bench_median(t) * 1e-3);
}

#endif
