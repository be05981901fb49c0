/* What the SDDMM entry points share with their CPU and CUDA implementations. */
#ifndef MF_SDDMM_INTERNAL_H
#define MF_SDDMM_INTERNAL_H

#include <stdint.h>

#include "core/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One checked mf_sddmm call; all arrays live on the backend's side (host for the CPU
 * backend, device for CUDA). */
typedef struct mf_sddmm_call {
    int k;
    const float *A;
    int64_t lda;
    const float *B;
    int64_t ldb;
    float alpha, beta;
    float *out;
    int pattern; /* nonzero: S's values count as 1 */
} mf_sddmm_call;

/* OpenMP over rows; the reference for the GPU tests. */
void mf_sddmm_cpu(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *call);

/* The CUDA backend (sddmm.cu): builds or reuses S's plan for call->k, then runs. */
mf_status mf_cuda_sddmm(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call);

/* Test hook (sddmm_hooks.cu: CUDA builds, internal archive only): run compiled variant v
 * (sddmm_tuning.h) with panel width tj and block_nnz entries per block, bypassing the
 * tuning rules; finished on return. */
mf_status mf_cuda_sddmm_variant(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, int v,
                                int32_t tj, int64_t block_nnz);

/* RMSE of device factors U (rows x k, leading dimension ldu) and V (cols x k, ldv) over
 * R's stored entries, on a CUDA context (rmse.c): what mf_rmse does, for callers inside
 * the library whose factors are padded. */
mf_status mf_rmse_device(mf_ctx *ctx, mf_sparse *R, int k, const float *U, int64_t ldu,
                         const float *V, int64_t ldv, double *rmse);

/* sum of out[0..n)^2 in double, on the device (rmse). */
mf_status mf_cuda_sum_squares(mf_ctx *ctx, const float *x, int64_t n, double *sum);

#ifdef __cplusplus
}
#endif
#endif
