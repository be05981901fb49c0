/* SDDMM and RMSE for the other algorithms (ALS, SGD, ASD): the one sddmm header another
 * folder may include. These are what mf_sddmm and mf_rmse do after their argument checks,
 * with the arrays in host or device memory and any leading dimensions, so that an
 * algorithm computes its RMSE the one way the public function does, on its own (padded)
 * working factors, without a copy. The caller passes checked arguments: k >= 1,
 * lda, ldb >= k, arrays in `where` memory (device memory only on a CUDA context). */
#ifndef MF_SDDMM_H
#define MF_SDDMM_H

#include <stdint.h>

#include "core/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One SDDMM: for every stored entry p = (i, j) of S, in canonical order,
 * out[p] = alpha * (pattern ? 1 : S_ij) * dot(A[i, 0..k), B[j, 0..k)) + beta * out[p]. */
typedef struct mf_sddmm_call {
    int k;
    const float *A; /* rows x k, leading dimension lda */
    int64_t lda;
    const float *B; /* cols x k, leading dimension ldb */
    int64_t ldb;
    float alpha, beta;
    float *out;    /* nnz entries; with beta == 0 only written */
    int pattern;   /* nonzero: S's values count as 1 */
    int precision; /* an mf_precision; 0 (zero-initialized calls): exact float */
} mf_sddmm_call;

/* The SDDMM of `call`, its arrays in `where` memory. On the CPU backend it runs at once;
 * on a CUDA context device arrays are used in place and the call is stream-ordered (it
 * returns once the work is queued), host arrays are staged and the call returns when out
 * holds the result. */
mf_status mf_sddmm_compute(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, mf_memory where);

/* The bias terms of an explicit-ratings model: an entry (i, j) adds mean + user[i] + item[j],
 * an absent array counting as zeros. The arrays live where the factors do. */
typedef struct mf_bias_terms {
    float mean;
    const float *user; /* R's rows entries, or NULL */
    const float *item; /* R's cols entries, or NULL */
} mf_bias_terms;

/* sqrt(mean over R's stored entries of (r_ij - b_ij - dot(A[i, 0..k), B[j, 0..k)))^2), a
 * pattern's entries counting as 1, with A (rows x k, lda), B (cols x k, ldb) and the bias
 * terms b (NULL: none) in `where` memory: residuals from one SDDMM (alpha = -1, beta = 1 on
 * a copy of the values less the biases), their squares summed in double. No entries gives
 * 0. Returns when *rmse holds the result. */
mf_status mf_rmse_compute(mf_ctx *ctx, mf_sparse *R, int k, const float *A, int64_t lda,
                          const float *B, int64_t ldb, const mf_bias_terms *bias, mf_memory where,
                          double *rmse);

/* mf_rmse_compute with the sampled products in `precision` (an mf_precision the caller
 * checked, as every argument here):
 * mf_rmse_compute is this with MF_PRECISION_FP32. */
mf_status mf_rmse_compute_ex(mf_ctx *ctx, mf_sparse *R, int k, const float *A, int64_t lda,
                             const float *B, int64_t ldb, const mf_bias_terms *bias,
                             mf_memory where, int precision, double *rmse);

#ifdef __cplusplus
}
#endif
#endif
