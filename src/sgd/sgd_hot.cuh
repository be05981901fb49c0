/* Replicas of the popular items' rows for the CUDA engine of SGD (sgd_hot.cu). CUDA C++ only.
 *
 * Why: under the user-chunk order an item rated by most users is in most chunks, so
 * thousands of concurrent updates read and write the same two L2 lines, which serializes
 * them. Measured at k = 128 fp16 on the netflix shape (top item rated by 70% of users): 4.78
 * G updates/s, against 6.77 for the same ratings with item popularity made uniform.
 *
 * With R = 4, 8, 16 working rows per popular item: 5.85 / 6.07 / 6.65 on that shape, 5.01 /
 * 5.75 / 6.54 on lognormal-cap45 (3.86 without), 4.42 / 5.62 / 6.57 on zipf (3.52), each test
 * RMSE equal or 0.0003 lower (bench_sgd --replicas 0,4,8,16, H100, biases on).
 *
 * How: an item that more than MF_SGD_HOT_CONCURRENCY updates would hold at once (its share
 * of the ratings times the workers, sgd_internal.h) gets MF_SGD_HOT_REPLICAS working rows
 * (and biases) past the item rows.
 * Chunk c's entries of such an item name replica c mod R instead (rewritten once on the
 * device), so the epoch kernels are unchanged. Before each epoch (or part of one) the
 * replicas start from the item's row; after it the item's row becomes their mean: every
 * replica is SGD on its share of the item's ratings from the same start, and the mean is
 * the model average (local SGD), which converges where each replica does. */
#ifndef MF_SGD_HOT_CUH
#define MF_SGD_HOT_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "sgd/sgd_internal.h"
#include "sgd/sgd_kernels.cuh"

namespace sgd
{

/* counts[item] += 1 for every entry. */
static __global__ void count_items_kernel(const mf_sgd_entry *e, int64_t nnz, unsigned *counts)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nnz;
         i += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(counts + e[i].item, 1u);
}

/* Chunk c's entries of hot item i (hot[i] = h >= 0) name working row cols + h R + c mod R. A
 * warp per chunk. */
static __global__ void remap_hot_kernel(mf_sgd_entry *e, const int64_t *chunk_begin,
                                        int64_t nchunks, const int32_t *hot, int32_t cols,
                                        int replicas)
{
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < nchunks; c += warps)
        for (int64_t j = chunk_begin[c] + lane; j < chunk_begin[c + 1]; j += 32) {
            const int32_t h = hot[e[j].item];
            if (h >= 0)
                e[j].item = cols + h * replicas + (int32_t)(c % replicas);
        }
}

/* For hot rows h in [h0, h0 + hot): gather = 0: every replica of hot row h (rows cols + h R +
 * r) and its bias take item items[h]'s values; gather = 1: the item's row and bias take the
 * mean of its replicas.
 * Element kp of a row stands for its bias (bi NULL: none). Where the engine renumbered its
 * rows (sgd_local_bias.cuh), row x of these numbers is row map[x] of V and bi (NULL: x). */
template <bool HALF>
__global__ void hot_rows_kernel(void *V, float *bi, const int32_t *items, int32_t h0, int32_t hot,
                                int replicas, int32_t cols, int kp, int gather, const int32_t *map)
{
    using elem = typename std::conditional<HALF, __half, float>::type;
    elem *X = static_cast<elem *>(V);
    const int64_t n = (int64_t)hot * (kp + 1);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int32_t h = h0 + (int32_t)(i / (kp + 1));
        const int t = (int)(i % (kp + 1));
        const int64_t first = (int64_t)cols + (int64_t)h * replicas;
        const int64_t item = map ? map[items[h]] : items[h];
        auto row = [&](int r) -> int64_t { return map ? map[first + r] : first + r; };
        if (t < kp) {
            if (gather) {
                float s = 0.0f;
                for (int r = 0; r < replicas; r++)
                    s += (float)X[row(r) * kp + t];
                X[item * kp + t] = (elem)(s / (float)replicas);
            } else {
                const elem m = X[item * kp + t];
                for (int r = 0; r < replicas; r++)
                    X[row(r) * kp + t] = m;
            }
        } else if (bi) {
            if (gather) {
                float s = 0.0f;
                for (int r = 0; r < replicas; r++)
                    s += bi[row(r) * MF_SGD_BIAS_STRIDE];
                bi[item * MF_SGD_BIAS_STRIDE] = s / (float)replicas;
            } else {
                for (int r = 0; r < replicas; r++)
                    bi[row(r) * MF_SGD_BIAS_STRIDE] = bi[item * MF_SGD_BIAS_STRIDE];
            }
        }
    }
}

} // namespace sgd

#endif
