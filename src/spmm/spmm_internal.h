/* What mf_spmm shares with its CPU and CUDA implementations. */
#ifndef MF_SPMM_INTERNAL_H
#define MF_SPMM_INTERNAL_H

#include <stdint.h>

#include "core/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Y = alpha * op(S) * X + beta * Y on the CPU / through cuSPARSE (spmm.c, spmm.cu). */
typedef struct mf_spmm_call {
    mf_op op;
    int64_t n;
    float alpha;
    const float *X;
    int64_t ldx;
    float beta;
    float *Y;
    int64_t ldy;
} mf_spmm_call;
mf_status mf_spmm_cpu(mf_ctx *ctx, mf_sparse *S, const mf_spmm_call *call);
mf_status mf_cuda_spmm(mf_ctx *ctx, mf_sparse *S, const mf_spmm_call *call);

#ifdef __cplusplus
}
#endif
#endif
