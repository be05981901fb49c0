/* RMSE, the one way mfact computes it (mf_rmse, mf_model_rmse, and ALS, SGD and ASD through
 * sddmm.h): residuals r - biases - A B^T at the stored entries through SDDMM (a copy of the
 * ratings less the bias terms as out, alpha = -1, beta = 1, S taken as a pattern), then their
 * squares summed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"
#include "sddmm/sddmm.h"
#include "sddmm/sddmm_internal.h"

static mf_status rmse_cpu(mf_ctx *ctx, mf_sparse *R, mf_sddmm_call *call, const mf_bias_terms *bias,
                          double *sum)
{
    size_t n = (size_t)R->nnz;
    float *resid = malloc(n * sizeof *resid);
    if (!resid)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                       "out of host memory for the %zu residuals of an RMSE", n);
    if (R->val)
        memcpy(resid, R->val, n * sizeof *resid);
    else
        for (size_t p = 0; p < n; p++)
            resid[p] = 1.0f;
    if (bias)
        for (int32_t i = 0; i < R->rows; i++) {
            const float base = bias->mean + (bias->user ? bias->user[i] : 0.0f);
            for (int64_t p = R->row_ptr[i]; p < R->row_ptr[i + 1]; p++)
                resid[p] -= base + (bias->item ? bias->item[R->col[p]] : 0.0f);
        }
    call->out = resid;
    mf_sddmm_cpu(ctx, R, call);
    /* Blocks of a fixed size summed in order: the same bits for any count of threads and
     * any timing (an OpenMP reduction adds the threads' sums in the order they finish). */
    enum { BLOCK = 65536 };
    const size_t blocks = (n + BLOCK - 1) / BLOCK;
    double *part = malloc((blocks ? blocks : 1) * sizeof *part);
    if (!part) {
        free(resid);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "RMSE: out of host memory");
    }
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) if (blocks > 1)
    for (size_t b = 0; b < blocks; b++) {
        const size_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        double s = 0.0;
        for (size_t p = b * BLOCK; p < end; p++)
            s += (double)resid[p] * resid[p];
        part[b] = s;
    }
    double s = 0.0;
    for (size_t b = 0; b < blocks; b++)
        s += part[b];
    free(part);
    free(resid);
    *sum = s;
    return MF_OK;
}

static mf_status rmse_cuda(mf_ctx *ctx, mf_sparse *R, mf_sddmm_call *call,
                           const mf_bias_terms *bias, mf_memory where, double *sum)
{
    const int64_t *row_ptr;
    const int32_t *col;
    const float *val;
    MF_TRY(mf_sparse_device_csr(R, &row_ptr, &col, &val));
    if (!val)
        MF_TRY(mf_sparse_device_ones(R, &val));
    mf_dbuf u = {0}, v = {0}, bu = {0}, bi = {0}, resid = {0};
    mf_bias_terms b = bias ? *bias : (mf_bias_terms){0.0f, NULL, NULL};
    mf_status st = MF_OK;
    if (where == MF_MEMORY_HOST) {
        st = mf_upload(ctx, &u, call->A, mf_matrix_bytes(R->rows, call->k, call->lda),
                       "RMSE factor A");
        if (st == MF_OK)
            st = mf_upload(ctx, &v, call->B, mf_matrix_bytes(R->cols, call->k, call->ldb),
                           "RMSE factor B");
        if (st == MF_OK && b.user)
            st = mf_upload(ctx, &bu, b.user, (size_t)R->rows * sizeof(float), "RMSE user biases");
        if (st == MF_OK && b.item)
            st = mf_upload(ctx, &bi, b.item, (size_t)R->cols * sizeof(float), "RMSE item biases");
        call->A = u.ptr;
        call->B = v.ptr;
        b.user = b.user ? bu.ptr : NULL;
        b.item = b.item ? bi.ptr : NULL;
    }
    if (st == MF_OK)
        st = mf_upload(ctx, &resid, val, (size_t)R->nnz * sizeof(float), "RMSE residuals");
    if (st == MF_OK && bias)
        st = mf_cuda_bias_offsets(ctx, R, &b, -1.0f, 1, resid.ptr);
    if (st == MF_OK) {
        call->out = resid.ptr;
        st = mf_cuda_sddmm(ctx, R, call);
    }
    if (st == MF_OK)
        st = mf_cuda_sum_squares(ctx, resid.ptr, R->nnz, sum);
    mf_dmem_free(ctx, &u);
    mf_dmem_free(ctx, &v);
    mf_dmem_free(ctx, &bu);
    mf_dmem_free(ctx, &bi);
    mf_dmem_free(ctx, &resid);
    return st;
}

mf_status mf_rmse_compute_ex(mf_ctx *ctx, mf_sparse *R, int k, const float *A, int64_t lda,
                             const float *B, int64_t ldb, const mf_bias_terms *bias,
                             mf_memory where, int precision, double *rmse)
{
    if (R->nnz == 0) {
        *rmse = 0.0;
        return MF_OK;
    }
    mf_sddmm_call call = {k, A, lda, B, ldb, -1.0f, 1.0f, NULL, 1, precision};
    double sum = 0.0;
    if (ctx->backend == MF_BACKEND_CUDA)
        MF_TRY(rmse_cuda(ctx, R, &call, bias, where, &sum));
    else
        MF_TRY(rmse_cpu(ctx, R, &call, bias, &sum));
    *rmse = sqrt(sum / (double)R->nnz);
    return MF_OK;
}

mf_status mf_rmse_compute(mf_ctx *ctx, mf_sparse *R, int k, const float *A, int64_t lda,
                          const float *B, int64_t ldb, const mf_bias_terms *bias, mf_memory where,
                          double *rmse)
{
    return mf_rmse_compute_ex(ctx, R, k, A, lda, B, ldb, bias, where, MF_PRECISION_FP32, rmse);
}

/* The checks and the call of mf_rmse and mf_rmse_ex; fn is the entry the caller called. */
static mf_status rmse_checked(const char *fn, mf_ctx *ctx, const mf_sparse *ratings, int k,
                              const float *A, int64_t lda, const float *B, int64_t ldb,
                              mf_memory where, mf_precision precision, double *rmse)
{
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, ratings, "%s: ratings is NULL", fn);
    MF_REQUIRE(ctx, ratings->ctx == ctx, "%s: ratings belongs to another context", fn);
    MF_REQUIRE(ctx, k >= 1, "%s: k = %d must be at least 1", fn, k);
    MF_TRY(mf_check_dense(ctx, fn, "lda", lda, "k", k, ratings->rows));
    MF_TRY(mf_check_dense(ctx, fn, "ldb", ldb, "k", k, ratings->cols));
    MF_REQUIRE(ctx, A, "%s: A is NULL", fn);
    MF_REQUIRE(ctx, B, "%s: B is NULL", fn);
    MF_REQUIRE(ctx, rmse, "%s: rmse is NULL", fn);
    MF_TRY(mf_precision_check(ctx, fn, "precision", (int)precision));
    MF_TRY(mf_check_memory(ctx, A, where, fn, "A"));
    MF_TRY(mf_check_memory(ctx, B, where, fn, "B"));
    /* The handle is logically const: what it caches does not change what it represents. */
    return mf_rmse_compute_ex(ctx, (mf_sparse *)ratings, k, A, lda, B, ldb, NULL, where,
                              (int)precision, rmse);
}

mf_status mf_rmse(mf_ctx *ctx, const mf_sparse *ratings, int k, const float *A, int64_t lda,
                  const float *B, int64_t ldb, mf_memory where, double *rmse)
{
    return rmse_checked("mf_rmse", ctx, ratings, k, A, lda, B, ldb, where, MF_PRECISION_FP32, rmse);
}

mf_status mf_rmse_ex(mf_ctx *ctx, const mf_sparse *ratings, int k, const float *A, int64_t lda,
                     const float *B, int64_t ldb, mf_memory where, mf_precision precision,
                     double *rmse)
{
    return rmse_checked("mf_rmse_ex", ctx, ratings, k, A, lda, B, ldb, where, precision, rmse);
}
