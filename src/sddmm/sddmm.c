/* mf_sddmm: argument checks, then the CPU backend or the CUDA backend, staging host arrays
 * through the memory manager when a CUDA context is given host memory. */
#include <math.h>

#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"
#include "sddmm/sddmm_internal.h"

#define MF_SDDMM_KNOWN_FLAGS ((unsigned)MF_SDDMM_PATTERN)

/* The CUDA call with host arrays: A and B go up, out goes up only when beta reads it, and
 * comes back only after the kernel succeeded, so a failure leaves the caller's out as it
 * was. */
static mf_status sddmm_staged(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *host)
{
    mf_dbuf a = {0}, b = {0}, out = {0};
    size_t out_bytes = (size_t)S->nnz * sizeof(float);
    mf_status st =
        mf_upload(ctx, &a, host->A, mf_matrix_bytes(S->rows, host->k, host->lda), "SDDMM input A");
    if (st == MF_OK)
        st = mf_upload(ctx, &b, host->B, mf_matrix_bytes(S->cols, host->k, host->ldb),
                       "SDDMM input B");
    if (st == MF_OK)
        st = mf_stage_output(ctx, &out, host->out, out_bytes, host->beta != 0.0f, "SDDMM output");
    if (st == MF_OK) {
        mf_sddmm_call dev = *host;
        dev.A = a.ptr;
        dev.B = b.ptr;
        dev.out = out.ptr;
        st = mf_cuda_sddmm(ctx, S, &dev);
    }
    if (st == MF_OK)
        st = mf_cuda_copy(ctx, host->out, out.ptr, out_bytes);
    mf_dmem_free(ctx, &a);
    mf_dmem_free(ctx, &b);
    mf_dmem_free(ctx, &out);
    return st;
}

mf_status mf_sddmm_compute(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, mf_memory where)
{
    if (S->nnz == 0)
        return MF_OK;
    if (ctx->backend != MF_BACKEND_CUDA) {
        mf_sddmm_cpu(ctx, S, call);
        return MF_OK;
    }
    if (where == MF_MEMORY_DEVICE)
        return mf_cuda_sddmm(ctx, S, call);
    return sddmm_staged(ctx, S, call);
}

/* The checks and the call of mf_sddmm and mf_sddmm_ex; fn is the entry the caller called, so
 * that a message names the function in the caller's code. */
static mf_status sddmm_checked(const char *fn, mf_ctx *ctx, const mf_sparse *S, int k,
                               const float *A, int64_t lda, const float *B, int64_t ldb,
                               float alpha, float beta, float *out, mf_memory where, unsigned flags,
                               mf_precision precision)
{
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, S, "%s: S is NULL", fn);
    MF_REQUIRE(ctx, S->ctx == ctx, "%s: S belongs to another context", fn);
    MF_REQUIRE(ctx, k >= 1, "%s: k = %d must be at least 1", fn, k);
    MF_TRY(mf_check_dense(ctx, fn, "lda", lda, "k", k, S->rows));
    MF_TRY(mf_check_dense(ctx, fn, "ldb", ldb, "k", k, S->cols));
    MF_REQUIRE(ctx, isfinite(alpha) && isfinite(beta),
               "%s: alpha = %g and beta = %g must be finite", fn, (double)alpha, (double)beta);
    MF_REQUIRE(ctx, (flags & ~MF_SDDMM_KNOWN_FLAGS) == 0, "%s: unknown flags 0x%x", fn,
               flags & ~MF_SDDMM_KNOWN_FLAGS);
    const int prec = (int)precision;
    MF_TRY(mf_precision_check(ctx, fn, "precision", prec));
    MF_REQUIRE(ctx, A, "%s: A is NULL", fn);
    MF_REQUIRE(ctx, B, "%s: B is NULL", fn);
    MF_REQUIRE(ctx, S->nnz == 0 || out, "%s: out is NULL", fn);
    MF_TRY(mf_check_memory(ctx, A, where, fn, "A"));
    MF_TRY(mf_check_memory(ctx, B, where, fn, "B"));
    if (S->nnz > 0)
        MF_TRY(mf_check_memory(ctx, out, where, fn, "out"));
    mf_sddmm_call call = {
        k, A, lda, B, ldb, alpha, beta, out, (flags & MF_SDDMM_PATTERN) || !S->val, prec};
    /* The handle is logically const: the plan and device copies it caches do not change
     * what it represents. */
    return mf_sddmm_compute(ctx, (mf_sparse *)S, &call, where);
}

mf_status mf_sddmm(mf_ctx *ctx, const mf_sparse *S, int k, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float alpha, float beta, float *out,
                   mf_memory where, unsigned flags)
{
    return sddmm_checked("mf_sddmm", ctx, S, k, A, lda, B, ldb, alpha, beta, out, where, flags,
                         MF_PRECISION_FP32);
}

mf_status mf_sddmm_ex(mf_ctx *ctx, const mf_sparse *S, int k, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float alpha, float beta, float *out,
                      mf_memory where, unsigned flags, mf_precision precision)
{
    return sddmm_checked("mf_sddmm_ex", ctx, S, k, A, lda, B, ldb, alpha, beta, out, where, flags,
                         precision);
}
