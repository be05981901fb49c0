/* mf_spmm: argument checks, host staging for CUDA contexts, and the CPU backend (OpenMP
 * over output rows; S^T products walk the cached host transpose, so no two threads write
 * one row). */
#include <math.h>
#include <string.h>

#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"
#include "spmm/spmm_internal.h"

/* Y[i, :] = alpha * sum_p v_p X[idx_p, :] + beta * Y[i, :] over a CSR (ptr, idx, val). */
static void spmm_rows(mf_ctx *ctx, int32_t rows, const int64_t *ptr, const int32_t *idx,
                      const float *val, const mf_spmm_call *c)
{
    (void)ctx; /* read by OpenMP alone */
    const int64_t n = c->n;
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 32) if (rows > 256)
    for (int32_t i = 0; i < rows; i++) {
        float *y = c->Y + (int64_t)i * c->ldy;
        if (c->beta == 0.0f)
            memset(y, 0, (size_t)n * sizeof *y);
        else
            for (int64_t t = 0; t < n; t++)
                y[t] *= c->beta;
        for (int64_t p = ptr[i]; p < ptr[i + 1]; p++) {
            const float a = c->alpha * (val ? val[p] : 1.0f);
            const float *x = c->X + (int64_t)idx[p] * c->ldx;
#pragma omp simd
            for (int64_t t = 0; t < n; t++)
                y[t] += a * x[t];
        }
    }
}

mf_status mf_spmm_cpu(mf_ctx *ctx, mf_sparse *S, const mf_spmm_call *c)
{
    if (c->op == MF_OP_N) {
        spmm_rows(ctx, S->rows, S->row_ptr, S->col, S->val, c);
        return MF_OK;
    }
    MF_TRY(mf_sparse_host_transpose(S));
    spmm_rows(ctx, S->cols, S->transpose.ptr, S->transpose.idx, S->transpose.val, c);
    return MF_OK;
}

static mf_status spmm_staged(mf_ctx *ctx, mf_sparse *S, const mf_spmm_call *host, int64_t p,
                             int64_t q)
{
    mf_dbuf x = {0}, y = {0};
    size_t y_bytes = mf_matrix_bytes(p, host->n, host->ldy);
    mf_status st = mf_upload(ctx, &x, host->X, mf_matrix_bytes(q, host->n, host->ldx), "SpMM X");
    if (st == MF_OK)
        st = mf_stage_output(ctx, &y, host->Y, y_bytes, host->beta != 0.0f, "SpMM Y");
    if (st == MF_OK) {
        mf_spmm_call dev = *host;
        dev.X = x.ptr;
        dev.Y = y.ptr;
        st = mf_cuda_spmm(ctx, S, &dev);
    }
    if (st == MF_OK)
        st = mf_cuda_copy(ctx, host->Y, y.ptr, y_bytes);
    mf_dmem_free(ctx, &x);
    mf_dmem_free(ctx, &y);
    return st;
}

mf_status mf_spmm(mf_ctx *ctx, mf_op op, const mf_sparse *S, int64_t n, float alpha, const float *X,
                  int64_t ldx, float beta, float *Y, int64_t ldy, mf_memory where)
{
    static const char fn[] = "mf_spmm";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, S, "%s: S is NULL", fn);
    MF_REQUIRE(ctx, S->ctx == ctx, "%s: S belongs to another context", fn);
    MF_REQUIRE(ctx, op == MF_OP_N || op == MF_OP_T, "%s: op = %d is not an mf_op value", fn,
               (int)op);
    MF_REQUIRE(ctx, n >= 1, "%s: n = %lld must be at least 1", fn, (long long)n);
    /* op(S) is p x q: X has q rows, Y has p */
    const int64_t p = op == MF_OP_N ? S->rows : S->cols, q = op == MF_OP_N ? S->cols : S->rows;
    MF_TRY(mf_check_dense(ctx, fn, "ldx", ldx, "n", n, q));
    MF_TRY(mf_check_dense(ctx, fn, "ldy", ldy, "n", n, p));
    MF_REQUIRE(ctx, isfinite(alpha) && isfinite(beta),
               "%s: alpha = %g and beta = %g must be finite", fn, (double)alpha, (double)beta);
    MF_REQUIRE(ctx, X && Y, "%s: X or Y is NULL", fn);
    MF_TRY(mf_check_memory(ctx, X, where, fn, "X"));
    MF_TRY(mf_check_memory(ctx, Y, where, fn, "Y"));
    mf_sparse *M = (mf_sparse *)S; /* caches only */
    mf_spmm_call call = {op, n, alpha, X, ldx, beta, Y, ldy};
    if (ctx->backend != MF_BACKEND_CUDA)
        return mf_spmm_cpu(ctx, M, &call);
    if (where == MF_MEMORY_DEVICE)
        return mf_cuda_spmm(ctx, M, &call);
    return spmm_staged(ctx, M, &call, p, q);
}
