/* Predictions of explicit-ratings models (mf_predict, mf_predict_pairs, mf_model_rmse):
 * mean + user bias + item bias + U_u . V_i (the RMSE of a model of the data's shape is
 * rmse.c's, which takes the bias terms).
 * At the entries of a matrix of the model's shape the dot products come from SDDMM (its
 * tuned plan) and the bias terms are one pass over the entries; a matrix with users or
 * items the model has not seen, and arbitrary pairs, go through the pairs path, where an
 * unseen side contributes no terms. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/model.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_round.h"

/* Host arrays on a CUDA context go up once; `bufs` owns the copies (4 of them). */
static mf_status stage_model(mf_ctx *ctx, int32_t rows, int32_t cols, int k, const float **A,
                             int64_t lda, const float **B, int64_t ldb, mf_bias_terms *b,
                             mf_dbuf bufs[4])
{
    MF_TRY(mf_upload(ctx, &bufs[0], *A, mf_matrix_bytes(rows, k, lda), "the model's U"));
    *A = bufs[0].ptr;
    MF_TRY(mf_upload(ctx, &bufs[1], *B, mf_matrix_bytes(cols, k, ldb), "the model's V"));
    *B = bufs[1].ptr;
    if (b->user) {
        MF_TRY(mf_upload(ctx, &bufs[2], b->user, (size_t)rows * sizeof(float), "user biases"));
        b->user = bufs[2].ptr;
    }
    if (b->item) {
        MF_TRY(mf_upload(ctx, &bufs[3], b->item, (size_t)cols * sizeof(float), "item biases"));
        b->item = bufs[3].ptr;
    }
    return MF_OK;
}

static void free_bufs(mf_ctx *ctx, mf_dbuf *bufs, int n)
{
    for (int i = 0; i < n; i++)
        mf_dmem_free(ctx, &bufs[i]);
}

/* ---- the public functions ------------------------------------------------------------- */

static mf_pairs_call pairs_of(const mf_model *m, int64_t n, const int32_t *user,
                              const int32_t *item, float *out)
{
    mf_pairs_call c = {n,
                       user,
                       item,
                       m->users,
                       m->items,
                       m->k,
                       m->U,
                       m->ldu,
                       m->V,
                       m->ldv,
                       {m->mean, m->user_bias, m->item_bias},
                       out,
                       (int)m->precision};
    return c;
}

static void pairs_cpu(const mf_pairs_call *c, int threads)
{
#pragma omp parallel for num_threads(threads) if (c->n > 4096)
    for (int64_t p = 0; p < c->n; p++) {
        const int32_t u = c->user[p], i = c->item[p];
        const int ku = u < c->users, ki = i < c->items;
        float pred = c->bias.mean;
        if (ku && ki) {
            const float *a = c->A + (int64_t)u * c->lda, *b = c->B + (int64_t)i * c->ldb;
            float dot = 0.0f;
            if (c->precision == MF_PRECISION_FP32 || c->precision == MF_PRECISION_3XTF32)
                for (int t = 0; t < c->k; t++)
                    dot += a[t] * b[t];
            else
                for (int t = 0; t < c->k; t++)
                    dot += mf_round_to(a[t], c->precision) * mf_round_to(b[t], c->precision);
            pred += dot;
        }
        if (ku && c->bias.user)
            pred += c->bias.user[u];
        if (ki && c->bias.item)
            pred += c->bias.item[i];
        c->out[p] = pred;
    }
}

/* Pairs with every array in m->where memory. */
static mf_status predict_pairs(mf_ctx *ctx, const mf_model *m, int64_t n, const int32_t *user,
                               const int32_t *item, float *out)
{
    static const char fn[] = "mf_predict_pairs";
    if (n == 0)
        return MF_OK;
    if (m->where == MF_MEMORY_HOST) /* device pairs: the kernel checks them */
        for (int64_t p = 0; p < n; p++)
            if (user[p] < 0 || item[p] < 0)
                return mf_fail(ctx, MF_ERR_INVALID_DATA,
                               "%s: pair %lld has a negative index (user %d, item %d)", fn,
                               (long long)p, (int)user[p], (int)item[p]);
    if (ctx->backend != MF_BACKEND_CUDA) {
        mf_pairs_call c = pairs_of(m, n, user, item, out);
        pairs_cpu(&c, mf_ctx_threads(ctx));
        return MF_OK;
    }
    if (m->where == MF_MEMORY_DEVICE) {
        mf_pairs_call c = pairs_of(m, n, user, item, out);
        MF_TRY(mf_cuda_predict_pairs(ctx, &c));
        return mf_cuda_sync(ctx); /* the kernels are stream-ordered: wait for them */
    }
    /* Host arrays on a CUDA context: staged up, the predictions copied back. */
    mf_model d = *m;
    mf_bias_terms b = {m->mean, m->user_bias, m->item_bias};
    mf_dbuf bufs[7] = {{0}};
    mf_status st = stage_model(ctx, m->users, m->items, m->k, &d.U, m->ldu, &d.V, m->ldv, &b, bufs);
    if (st == MF_OK)
        st = mf_upload(ctx, &bufs[4], user, (size_t)n * sizeof *user, "the pairs' users");
    if (st == MF_OK)
        st = mf_upload(ctx, &bufs[5], item, (size_t)n * sizeof *item, "the pairs' items");
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &bufs[6], (size_t)n * sizeof(float), "predictions");
    if (st == MF_OK) {
        d.user_bias = b.user;
        d.item_bias = b.item;
        mf_pairs_call c = pairs_of(&d, n, bufs[4].ptr, bufs[5].ptr, bufs[6].ptr);
        st = mf_cuda_predict_pairs(ctx, &c);
    }
    if (st == MF_OK)
        st = mf_cuda_copy(ctx, out, bufs[6].ptr, (size_t)n * sizeof(float));
    free_bufs(ctx, bufs, 7);
    return st;
}

mf_status mf_predict_pairs(mf_ctx *ctx, const mf_model *model, int64_t n, const int32_t *user,
                           const int32_t *item, float *out)
{
    static const char fn[] = "mf_predict_pairs";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    mf_model m;
    MF_TRY(mf_model_check(ctx, model, fn, &m));
    MF_REQUIRE(ctx, n >= 0, "%s: n = %lld must be >= 0", fn, (long long)n);
    if (n == 0)
        return MF_OK;
    MF_REQUIRE(ctx, user && item && out, "%s: user, item and out must not be NULL", fn);
    MF_TRY(mf_check_memory(ctx, user, m.where, fn, "user"));
    MF_TRY(mf_check_memory(ctx, item, m.where, fn, "item"));
    MF_TRY(mf_check_memory(ctx, out, m.where, fn, "out"));
    return predict_pairs(ctx, &m, n, user, item, out);
}

/* Whether S's shape lies within the model's: then SDDMM serves it. */
static int fits(const mf_model *m, const mf_sparse *S)
{
    return S->rows <= m->users && S->cols <= m->items;
}

/* S within the model: the bias terms, then + U V^T at S's entries. */
static mf_status predict_fitting(mf_ctx *ctx, const mf_model *m, mf_sparse *S, float *out)
{
    mf_bias_terms b = {m->mean, m->user_bias, m->item_bias};
    if (ctx->backend != MF_BACKEND_CUDA) {
        for (int32_t i = 0; i < S->rows; i++)
            for (int64_t p = S->row_ptr[i]; p < S->row_ptr[i + 1]; p++)
                out[p] = b.mean + (b.user ? b.user[i] : 0.0f) + (b.item ? b.item[S->col[p]] : 0.0f);
        mf_sddmm_call call = {m->k, m->U, m->ldu, m->V, m->ldv,
                              1.0f, 1.0f, out,    1,    (int)m->precision};
        mf_sddmm_cpu(ctx, S, &call);
        return MF_OK;
    }
    mf_dbuf bufs[5] = {{0}};
    const float *A = m->U, *B = m->V;
    float *dout = out;
    mf_status st = MF_OK;
    if (m->where == MF_MEMORY_HOST) {
        st = stage_model(ctx, S->rows, S->cols, m->k, &A, m->ldu, &B, m->ldv, &b, bufs);
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &bufs[4], (size_t)S->nnz * sizeof(float), "predictions");
        dout = bufs[4].ptr;
    }
    /* The product first (beta = 0), then the bias terms added: the SDDMM is what can fail
     * (its plan, TF32's copies, partial sums), and it writes out only once it runs, so a
     * failed call leaves a device out as it was. The same bits as bias-then-product: one
     * rounding of product + bias either way. */
    mf_sddmm_call call = {m->k, A, m->ldu, B, m->ldv, 1.0f, 0.0f, dout, 1, (int)m->precision};
    if (st == MF_OK)
        st = mf_cuda_sddmm(ctx, S, &call);
    if (st == MF_OK)
        st = mf_cuda_bias_offsets(ctx, S, &b, 1.0f, 1, dout);
    if (st == MF_OK && m->where == MF_MEMORY_HOST)
        st = mf_cuda_copy(ctx, out, dout, (size_t)S->nnz * sizeof(float));
    else if (st == MF_OK)
        st = mf_cuda_sync(ctx);
    free_bufs(ctx, bufs, 5);
    return st;
}

/* S beyond the model: its coordinates as pairs, in m->where memory. */
static mf_status predict_beyond(mf_ctx *ctx, const mf_model *m, const mf_sparse *S, float *out)
{
    size_t n = (size_t)S->nnz;
    int32_t *row = malloc(n * sizeof *row), *col = malloc(n * sizeof *col);
    mf_status st = row && col ? MF_OK
                              : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                        "mf_predict: out of host memory for %zu coordinates", n);
    if (st == MF_OK)
        st = mf_sparse_get_coo(S, row, col, NULL, MF_MEMORY_HOST);
    mf_dbuf bufs[2] = {{0}};
    const int32_t *ur = row, *ic = col;
    if (st == MF_OK && m->where == MF_MEMORY_DEVICE) {
        st = mf_upload(ctx, &bufs[0], row, n * sizeof *row, "the entries' rows");
        if (st == MF_OK)
            st = mf_upload(ctx, &bufs[1], col, n * sizeof *col, "the entries' columns");
        ur = bufs[0].ptr, ic = bufs[1].ptr;
    }
    if (st == MF_OK)
        st = predict_pairs(ctx, m, S->nnz, ur, ic, out);
    free_bufs(ctx, bufs, 2);
    free(row);
    free(col);
    return st;
}

static mf_status check_matrix(mf_ctx *ctx, const mf_sparse *S, const char *fn, const char *name)
{
    MF_REQUIRE(ctx, S, "%s: %s is NULL", fn, name);
    MF_REQUIRE(ctx, S->ctx == ctx, "%s: %s belongs to another context", fn, name);
    return MF_OK;
}

mf_status mf_predict(mf_ctx *ctx, const mf_model *model, const mf_sparse *at, float *out)
{
    static const char fn[] = "mf_predict";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    mf_model m;
    MF_TRY(mf_model_check(ctx, model, fn, &m));
    MF_TRY(check_matrix(ctx, at, fn, "at"));
    if (at->nnz == 0)
        return MF_OK;
    MF_REQUIRE(ctx, out, "%s: out is NULL", fn);
    MF_TRY(mf_check_memory(ctx, out, m.where, fn, "out"));
    /* The handle is logically const: only its caches change. */
    if (fits(&m, at))
        return predict_fitting(ctx, &m, (mf_sparse *)at, out);
    return predict_beyond(ctx, &m, at, out);
}

mf_status mf_model_rmse(mf_ctx *ctx, const mf_model *model, const mf_sparse *ratings, double *rmse)
{
    static const char fn[] = "mf_model_rmse";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    mf_model m;
    MF_TRY(mf_model_check(ctx, model, fn, &m));
    MF_TRY(check_matrix(ctx, ratings, fn, "ratings"));
    MF_REQUIRE(ctx, rmse, "%s: rmse is NULL", fn);
    mf_sparse *R = (mf_sparse *)ratings;
    if (R->nnz == 0) {
        *rmse = 0.0;
        return MF_OK;
    }
    mf_bias_terms b = {m.mean, m.user_bias, m.item_bias};
    if (fits(&m, R))
        return mf_rmse_compute_ex(ctx, R, m.k, m.U, m.ldu, m.V, m.ldv, &b, m.where,
                                  (int)m.precision, rmse);
    /* Unseen users or items: the predictions on the host, then the residuals. */
    size_t n = (size_t)R->nnz;
    float *pred = malloc(n * sizeof *pred);
    if (!pred)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for %zu predictions", fn,
                       n);
    mf_status st = MF_OK;
    if (m.where == MF_MEMORY_DEVICE) {
        mf_dbuf dpred = {0};
        st = mf_dmem_alloc(ctx, &dpred, n * sizeof *pred, "predictions");
        if (st == MF_OK)
            st = predict_beyond(ctx, &m, R, dpred.ptr);
        if (st == MF_OK)
            st = mf_cuda_copy(ctx, pred, dpred.ptr, n * sizeof *pred);
        mf_dmem_free(ctx, &dpred);
    } else {
        st = predict_beyond(ctx, &m, R, pred);
    }
    double s = 0.0;
    for (size_t p = 0; st == MF_OK && p < n; p++) {
        const double d = (double)(R->val ? R->val[p] : 1.0f) - (double)pred[p];
        s += d * d;
    }
    free(pred);
    MF_TRY(st);
    *rmse = sqrt(s / (double)n);
    return MF_OK;
}
