// Device pieces of explicit-ratings predictions (predict.c): the bias terms at the stored
// entries of a matrix (added to an SDDMM's output, or subtracted from the ratings for an
// RMSE), and predictions for arbitrary (user, item) pairs.
#include "core/ctx.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_round.h"

#define PREDICT_THREADS 256

// A warp per row of S: the row's bias read once, each lane walks a stride of the row.
__global__ void __launch_bounds__(PREDICT_THREADS)
    bias_offsets_kernel(const int64_t *ptr, const int32_t *col, int32_t rows, float mean,
                        const float *user, const float *item, float sign, int accumulate,
                        float *out)
{
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
        const float base = mean + (user ? user[r] : 0.0f);
        for (int64_t p = ptr[r] + lane; p < ptr[r + 1]; p += 32) {
            const float b = base + (item ? item[col[p]] : 0.0f);
            out[p] = (accumulate ? out[p] : 0.0f) + sign * b;
        }
    }
}

static unsigned grid_for(int64_t work, int per_block)
{
    int64_t g = (work + per_block - 1) / per_block;
    if (g > 65535)
        g = 65535;
    return (unsigned)(g < 1 ? 1 : g);
}

extern "C" mf_status mf_cuda_bias_offsets(mf_ctx *ctx, mf_sparse *S, const mf_bias_terms *bias,
                                          float sign, int accumulate, float *out)
{
    if (S->nnz == 0)
        return MF_OK;
    mf_device_guard guard(ctx->link.cuda->device);
    const int64_t *ptr;
    const int32_t *col;
    const float *val;
    MF_TRY(mf_sparse_device_csr(S, &ptr, &col, &val));
    bias_offsets_kernel<<<grid_for(S->rows, PREDICT_THREADS / 32), PREDICT_THREADS, 0,
                          ctx->link.cuda->stream>>>(ptr, col, S->rows, bias->mean, bias->user,
                                                    bias->item, sign, accumulate, out);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "adding the bias terms", __FILE__, __LINE__);
    return MF_OK;
}

// The first pair with a negative index (atomicMin over pair numbers).
__global__ void first_negative_kernel(const int32_t *user, const int32_t *item, int64_t n,
                                      unsigned long long *first)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (int64_t)gridDim.x * blockDim.x)
        if (user[p] < 0 || item[p] < 0)
            atomicMin(first, (unsigned long long)p);
}

// A warp per pair: the lanes split the dot product, lane 0 adds the biases and writes.
// ROUND: the factors' entries rounded to c.precision (TF32, BF16, FP16) as they are read;
// products of rounded entries are exact in float, so fmaf adds them as the CPU does.
template <bool ROUND>
__global__ void __launch_bounds__(PREDICT_THREADS) pairs_kernel(mf_pairs_call c)
{
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t p = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; p < c.n; p += warps) {
        const int32_t u = c.user[p], i = c.item[p];
        const bool ku = u < c.users, ki = i < c.items;
        float dot = 0.0f;
        if (ku && ki) {
            const float *a = c.A + (int64_t)u * c.lda, *b = c.B + (int64_t)i * c.ldb;
            for (int t = lane; t < c.k; t += 32)
                dot = ROUND ? fmaf(mf_round_to(a[t], c.precision), mf_round_to(b[t], c.precision),
                                   dot)
                            : fmaf(a[t], b[t], dot);
            for (int m = 16; m > 0; m >>= 1)
                dot += __shfl_xor_sync(0xffffffffu, dot, m);
        }
        if (lane == 0) {
            float pred = c.bias.mean + dot;
            if (ku && c.bias.user)
                pred += c.bias.user[u];
            if (ki && c.bias.item)
                pred += c.bias.item[i];
            c.out[p] = pred;
        }
    }
}

extern "C" mf_status mf_cuda_predict_pairs(mf_ctx *ctx, const mf_pairs_call *call)
{
    if (call->n == 0)
        return MF_OK;
    mf_device_guard guard(ctx->link.cuda->device);
    cudaStream_t stream = ctx->link.cuda->stream;
    mf_dbuf first = {0, 0};
    MF_TRY(mf_dmem_alloc(ctx, &first, sizeof(unsigned long long), "the pairs' index check"));
    unsigned long long none = ~0ull, found = none;
    cudaError_t err =
        cudaMemcpyAsync(first.ptr, &none, sizeof none, cudaMemcpyHostToDevice, stream);
    if (err == cudaSuccess) {
        first_negative_kernel<<<grid_for(call->n, PREDICT_THREADS), PREDICT_THREADS, 0, stream>>>(
            call->user, call->item, call->n, (unsigned long long *)first.ptr);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(&found, first.ptr, sizeof found, cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    mf_dmem_free(ctx, &first);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "checking the pairs' indices", __FILE__, __LINE__);
    if (found != none) {
        int32_t u = 0, i = 0;
        MF_TRY(mf_cuda_copy(ctx, &u, call->user + found, sizeof u));
        MF_TRY(mf_cuda_copy(ctx, &i, call->item + found, sizeof i));
        return mf_fail(ctx, MF_ERR_INVALID_DATA,
                       "mf_predict_pairs: pair %llu has a negative index (user %d, item %d)", found,
                       (int)u, (int)i);
    }
    const unsigned grid = grid_for(call->n, PREDICT_THREADS / 32);
    if (call->precision == MF_PRECISION_FP32 || call->precision == MF_PRECISION_3XTF32)
        pairs_kernel<false><<<grid, PREDICT_THREADS, 0, stream>>>(*call);
    else
        pairs_kernel<true><<<grid, PREDICT_THREADS, 0, stream>>>(*call);
    err = cudaGetLastError();
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "predicting pairs", __FILE__, __LINE__);
    return MF_OK;
}
