/* SDDMM's CUDA entry points in a build without CUDA (the plans, the kernels, the tuning
 * variants): contexts are CPU contexts there, so these are reached only by mistake. */
#include "cuda/cuda_backend.h"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_tuning.h"

mf_status mf_cuda_sddmm(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call)
{
    (void)S;
    (void)call;
    return mf_cuda_absent(ctx);
}

mf_status mf_cuda_sum_squares(mf_ctx *ctx, const float *x, int64_t n, double *sum)
{
    (void)x;
    (void)n;
    (void)sum;
    return mf_cuda_absent(ctx);
}

mf_status mf_cuda_bias_offsets(mf_ctx *ctx, mf_sparse *S, const mf_bias_terms *bias, float sign,
                               int accumulate, float *out)
{
    (void)S, (void)bias, (void)sign, (void)accumulate, (void)out;
    return mf_cuda_absent(ctx);
}

mf_status mf_cuda_predict_pairs(mf_ctx *ctx, const mf_pairs_call *call)
{
    (void)call;
    return mf_cuda_absent(ctx);
}

int mf_sddmm_variant_count(void)
{
    return 0;
}

mf_sddmm_config mf_sddmm_variant_config(int i)
{
    (void)i;
    return (mf_sddmm_config){0, 0, 0, 0};
}
