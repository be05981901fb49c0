/* Recommendations' CUDA engine in a build without CUDA. */
#include "cuda/cuda_backend.h"
#include "recommend/recommend_internal.h"

mf_status mf_cuda_recommend(mf_ctx *ctx, const mf_rec_call *c)
{
    (void)c;
    return mf_cuda_absent(ctx);
}
