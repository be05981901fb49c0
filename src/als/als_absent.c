/* ALS's CUDA engine and its bench hooks in a build without CUDA. */
#include "als/als_internal.h"
#include "cuda/cuda_backend.h"

mf_status mf_cuda_als_engine(const mf_als_setup *s, mf_als_engine **out)
{
    (void)out;
    return mf_cuda_absent(s->ctx);
}

mf_status mf_cuda_als_solve_dense(mf_ctx *ctx, int k, int count, const float *A, const float *b,
                                  float *x)
{
    (void)k, (void)count, (void)A, (void)b, (void)x;
    return mf_cuda_absent(ctx);
}

mf_status mf_cuda_als_bench_begin(mf_ctx *ctx, mf_sparse *R, int k, float lambda, const float *V,
                                  int32_t count, mf_als_bench **out)
{
    (void)R, (void)k, (void)lambda, (void)V, (void)count, (void)out;
    return mf_cuda_absent(ctx);
}

mf_status mf_cuda_als_bench_solve(mf_als_bench *b, float *x, double *ms)
{
    (void)b, (void)x, (void)ms;
    return MF_ERR_NO_DEVICE;
}

mf_status mf_cuda_als_bench_dense(mf_als_bench *b, float *A, float *rhs)
{
    (void)b, (void)A, (void)rhs;
    return MF_ERR_NO_DEVICE;
}

void mf_cuda_als_bench_end(mf_als_bench *b)
{
    (void)b;
}
