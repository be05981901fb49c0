/* The CUDA interface of cuda/cuda_backend.h in a build without CUDA: no device is ever
 * usable, so contexts resolve to the CPU and CUDA-only requests fail clearly. */
#include <stdio.h>

#include "als/als_internal.h"
#include "bmf/bmf_asso.h"
#include "bmf/bmf_internal.h"
#include "core/ctx.h"
#include "cuda/cuda_backend.h"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_tuning.h"
#include "sgd/sgd_internal.h"
#include "spmm/spmm_internal.h"

static mf_status absent(mf_ctx *ctx)
{
    return mf_fail(ctx, MF_ERR_NO_DEVICE, "mfact was built without CUDA support");
}

int mf_cuda_device_count(char *why, size_t why_len)
{
    snprintf(why, why_len, "mfact was built without CUDA support");
    return 0;
}

mf_status mf_cuda_open(mf_ctx *ctx, int device)
{
    (void)device;
    return absent(ctx);
}

void mf_cuda_close(mf_ctx *ctx)
{
    (void)ctx;
}

mf_status mf_cuda_set_stream(mf_ctx *ctx, void *stream)
{
    (void)stream;
    return absent(ctx);
}

void *mf_cuda_stream(const mf_ctx *ctx)
{
    (void)ctx;
    return NULL;
}

mf_status mf_cuda_device_info(mf_ctx *ctx, mf_device_info *info)
{
    (void)info;
    return absent(ctx);
}

mf_status mf_cuda_release_cached(mf_ctx *ctx)
{
    return absent(ctx);
}

int mf_cuda_is_device_pointer(mf_ctx *ctx, const void *ptr)
{
    (void)ptr;
    absent(ctx);
    return -1;
}

mf_status mf_cuda_copy(mf_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return absent(ctx);
}

mf_status mf_cuda_random_uniform(mf_ctx *ctx, float *out, int64_t n, float lo, float hi,
                                 uint64_t seed, uint64_t stream)
{
    (void)out;
    (void)n;
    (void)lo;
    (void)hi;
    (void)seed;
    (void)stream;
    return absent(ctx);
}

const char *mf_cuda_build_info(void)
{
    return "cuda off";
}

mf_status mf_cuda_fill(mf_ctx *ctx, float *out, float value, int64_t n)
{
    (void)out;
    (void)value;
    (void)n;
    return absent(ctx);
}

void mf_cuda_sddmm_plan_free(mf_sparse *m)
{
    (void)m;
}

mf_status mf_cuda_sddmm(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call)
{
    (void)S;
    (void)call;
    return absent(ctx);
}

mf_status mf_cuda_sum_squares(mf_ctx *ctx, const float *x, int64_t n, double *sum)
{
    (void)x;
    (void)n;
    (void)sum;
    return absent(ctx);
}

mf_status mf_cuda_spmm(mf_ctx *ctx, mf_sparse *S, const mf_spmm_call *call)
{
    (void)S;
    (void)call;
    return absent(ctx);
}

mf_status mf_cuda_sddmm_variant(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, int v,
                                int32_t tj, int64_t block_nnz)
{
    (void)S;
    (void)call;
    (void)v;
    (void)tj;
    (void)block_nnz;
    return absent(ctx);
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

mf_status mf_cuda_bmf_engine(const mf_bmf_setup *s, mf_bmf_engine **out)
{
    (void)out;
    return absent(s->ctx);
}

mf_status mf_cuda_bmf_asso(const mf_bmf_asso_plan *p, uint64_t *A, uint64_t *B)
{
    (void)A;
    (void)B;
    return absent(p->ctx);
}

mf_status mf_cuda_als_engine(const mf_als_setup *s, mf_als_engine **out)
{
    (void)out;
    return absent(s->ctx);
}

mf_status mf_cuda_sgd_engine(const mf_sgd_setup *s, mf_sgd_engine **out)
{
    (void)out;
    return absent(s->ctx);
}

mf_status mf_cuda_als_solve_dense(mf_ctx *ctx, int k, int count, const float *A, const float *b,
                                  float *x)
{
    (void)k, (void)count, (void)A, (void)b, (void)x;
    return absent(ctx);
}

mf_status mf_cuda_als_bench_begin(mf_ctx *ctx, mf_sparse *R, int k, float lambda, const float *V,
                                  int32_t count, mf_als_bench **out)
{
    (void)R, (void)k, (void)lambda, (void)V, (void)count, (void)out;
    return absent(ctx);
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
