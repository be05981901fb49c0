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

// splitmix64's finalizer: a well-mixed 64-bit hash of z.
static inline uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// "32,128,512" as integers (--k lists).
static inline std::vector<int> parse_ints(const char *s)
{
    std::vector<int> v;
    for (const char *p = s; *p;) {
        v.push_back(atoi(p));
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    return v;
}

#endif
