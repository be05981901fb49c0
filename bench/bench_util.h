// What the benchmark programs share: fatal checks of CUDA and mfact calls (a benchmark
// stops at the first failure, with the call and its message), strict parsing of option
// values (a bad one exits with status 2), and a seeded hash for synthetic data.
#ifndef MFACT_BENCH_UTIL_H
#define MFACT_BENCH_UTIL_H

#include <ctype.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
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

// "32,128,512" into *v; false on anything else (an empty item, "12x", a value beyond int).
static inline bool read_ints(const char *s, std::vector<int> *v)
{
    v->clear();
    for (const char *p = s;;) {
        char *end = NULL;
        long x = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || x < INT32_MIN || x > INT32_MAX)
            return false;
        v->push_back((int)x);
        if (!*end)
            return true;
        p = end + 1;
    }
}

// The option arguments below are parsed whole: atoi's "12x" is 12 and its "" (a missing value)
// is 0, which measured something else without a word. Each ends the program with status 2,
// naming the option and the value, before any device work.

// One integer option's value (--repeat 5) in [min, max].
static inline int arg_int(const char *opt, const char *s, int min, int max = INT32_MAX)
{
    char *end = NULL;
    errno = 0;
    const long x = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || x < min || x > max) {
        if (max == INT32_MAX)
            fprintf(stderr, "%s: '%s' is not an integer of at least %d\n", opt, s, min);
        else
            fprintf(stderr, "%s: '%s' is not an integer in %d..%d\n", opt, s, min, max);
        exit(2);
    }
    return (int)x;
}

// One number option's value (--lambda 0.05): finite and at least `min`, or above it when
// `above` (a scale or a learning rate of 0 means nothing).
static inline double arg_number(const char *opt, const char *s, double min, bool above = false)
{
    char *end = NULL;
    const double x = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(x) || x < min || (above && x == min)) {
        if (isinf(min)) // any finite value (--beta)
            fprintf(stderr, "%s: '%s' is not a finite number\n", opt, s);
        else
            fprintf(stderr, "%s: '%s' is not a number %s %g\n", opt, s,
                    above ? "above" : "of at least", min);
        exit(2);
    }
    return x;
}

// A seed (--seed 7): decimal digits alone (strtoull reads "-1" as 2^64 - 1).
static inline uint64_t arg_seed(const char *opt, const char *s)
{
    char *end = NULL;
    errno = 0;
    const unsigned long long x = strtoull(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || *end != '\0' || errno == ERANGE) {
        fprintf(stderr, "%s: '%s' is not a seed (an unsigned 64-bit integer)\n", opt, s);
        exit(2);
    }
    return (uint64_t)x;
}

// A list option's integers (--gpus 1,2,4), each in [min, max]; the program ends with status 2
// on a malformed list or a value out of range, naming the option and the value.
static inline std::vector<int> arg_ints(const char *opt, const char *s, int min,
                                        int max = INT32_MAX)
{
    std::vector<int> v;
    if (!read_ints(s, &v)) {
        fprintf(stderr, "%s: '%s' is not a comma-separated list of integers\n", opt, s);
        exit(2);
    }
    for (int x : v)
        if (x < min || x > max) {
            if (max == INT32_MAX)
                fprintf(stderr, "%s: %d in '%s' is not at least %d\n", opt, x, s, min);
            else
                fprintf(stderr, "%s: %d in '%s' is not in %d..%d\n", opt, x, s, min, max);
            exit(2);
        }
    return v;
}

// The index in names[0..n) of s (--solver cg); an unknown name ends the program with status 2.
static inline int arg_choice(const char *opt, const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    fprintf(stderr, "%s: '%s' is not one of", opt, s);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %s", names[i]);
    fprintf(stderr, "\n");
    exit(2);
}

// The indices in names[0..n) of a comma-separated list (--init mean,uniform), in its order;
// an unknown or empty item ends the program with status 2: a typo must not be left out.
static inline std::vector<int> arg_choices(const char *opt, const char *s, const char *const *names,
                                           int n)
{
    std::vector<int> v;
    for (const char *p = s;;) {
        const size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < n; i++)
            if (strlen(names[i]) == len && !strncmp(p, names[i], len))
                found = i;
        if (found < 0) {
            fprintf(stderr, "%s: '%.*s' is not one of", opt, (int)len, p);
            for (int i = 0; i < n; i++)
                fprintf(stderr, " %s", names[i]);
            fprintf(stderr, "\n");
            exit(2);
        }
        v.push_back(found);
        if (!p[len])
            return v;
        p += len + 1;
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
