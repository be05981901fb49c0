/* mf_recommend and mf_similar_items: argument checks, then the engine of the context's
 * backend. */
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/model.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"
#include "recommend/recommend_internal.h"

/* A host copy of `bytes` at *p when `where` is the device; *owned is what to free. */
mf_status mf_rec_host_copy(mf_ctx *ctx, const void **p, size_t bytes, mf_memory where, void **owned)
{
    *owned = NULL;
    if (where == MF_MEMORY_HOST || !*p)
        return MF_OK;
    void *h = malloc(bytes + 1);
    if (!h)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "out of host memory staging a model");
    mf_status st = mf_cuda_copy(ctx, h, *p, bytes);
    if (st != MF_OK) {
        free(h);
        return st;
    }
    *p = *owned = h;
    return MF_OK;
}

mf_status mf_recommend_cpu_staged(mf_ctx *ctx, const mf_rec_call *c)
{
    mf_rec_call h = *c;
    mf_model *m = &h.model;
    void *own[6] = {NULL};
    const void *U = m->U, *V = m->V, *ub = m->user_bias, *ib = m->item_bias, *ids = c->ids;
    const size_t out_n = (size_t)c->n * c->N;
    mf_status st =
        mf_rec_host_copy(ctx, &U, mf_matrix_bytes(m->users, m->k, m->ldu), m->where, &own[0]);
    if (st == MF_OK)
        st = mf_rec_host_copy(ctx, &V, mf_matrix_bytes(m->items, m->k, m->ldv), m->where, &own[1]);
    if (st == MF_OK)
        st = mf_rec_host_copy(ctx, &ub, (size_t)m->users * sizeof(float), m->where, &own[2]);
    if (st == MF_OK)
        st = mf_rec_host_copy(ctx, &ib, (size_t)m->items * sizeof(float), m->where, &own[3]);
    if (st == MF_OK)
        st = mf_rec_host_copy(ctx, &ids, (size_t)c->n * sizeof(int32_t), c->where, &own[4]);
    if (st == MF_OK && c->where == MF_MEMORY_DEVICE) {
        own[5] = malloc(out_n * (sizeof(int32_t) + sizeof(float)) + 1);
        if (!own[5])
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "out of host memory for top-N lists");
        h.out_items = own[5];
        h.out_scores = (float *)(h.out_items + out_n);
    }
    m->U = U, m->V = V, m->user_bias = ub, m->item_bias = ib, h.ids = ids;
    if (st == MF_OK)
        st = mf_recommend_cpu(ctx, &h);
    if (st == MF_OK && c->where == MF_MEMORY_DEVICE) {
        st = mf_cuda_copy(ctx, c->out_items, h.out_items, out_n * sizeof(int32_t));
        if (st == MF_OK)
            st = mf_cuda_copy(ctx, c->out_scores, h.out_scores, out_n * sizeof(float));
    }
    for (int i = 0; i < 6; i++)
        free(own[i]);
    return st;
}

mf_status mf_recommend_dispatch(mf_ctx *ctx, const mf_rec_call *c)
{
    if (c->n == 0)
        return MF_OK;
    return ctx->backend == MF_BACKEND_CUDA ? mf_cuda_recommend(ctx, c) : mf_recommend_cpu(ctx, c);
}

/* Every id in [0, limit) (limit < 0: only >= 0); ids in `where` memory. */
static mf_status check_ids(mf_ctx *ctx, const int32_t *ids, int64_t n, mf_memory where,
                           int32_t limit, const char *fn, const char *name)
{
    const int32_t *h = ids;
    int32_t *copy = NULL;
    if (where == MF_MEMORY_DEVICE) {
        copy = malloc((size_t)n * sizeof *copy);
        if (!copy)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        mf_status st = mf_cuda_copy(ctx, copy, ids, (size_t)n * sizeof *copy);
        if (st != MF_OK) {
            free(copy);
            return st;
        }
        h = copy;
    }
    mf_status st = MF_OK;
    for (int64_t b = 0; b < n; b++)
        if (h[b] < 0 || (limit >= 0 && h[b] >= limit)) {
            st = limit >= 0
                     ? mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: %s[%lld] = %d is outside 0..%d", fn,
                               name, (long long)b, h[b], limit - 1)
                     : mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: %s[%lld] = %d is negative", fn, name,
                               (long long)b, h[b]);
            break;
        }
    free(copy);
    return st;
}

static mf_status check_call(mf_ctx *ctx, const mf_model *model, int64_t n, const int32_t *ids,
                            int N, int32_t *out_items, float *out_scores, const char *fn,
                            const char *name, mf_rec_call *c)
{
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    memset(c, 0, sizeof *c);
    MF_TRY(mf_model_check(ctx, model, fn, &c->model));
    MF_REQUIRE(ctx, n >= 0, "%s: n = %lld is negative", fn, (long long)n);
    MF_REQUIRE(ctx, N >= 1, "%s: N = %d must be at least 1", fn, N);
    MF_REQUIRE(ctx, n == 0 || (ids && out_items && out_scores),
               "%s: %s, out_items and out_scores must not be NULL", fn, name);
    MF_REQUIRE(ctx, n <= INT64_MAX / N, "%s: n x N overflows", fn);
    const mf_memory where = c->model.where;
    if (n > 0) {
        MF_TRY(mf_check_memory(ctx, ids, where, fn, name));
        MF_TRY(mf_check_memory(ctx, out_items, where, fn, "out_items"));
        MF_TRY(mf_check_memory(ctx, out_scores, where, fn, "out_scores"));
    }
    c->n = n, c->ids = ids, c->N = N;
    c->out_items = out_items, c->out_scores = out_scores, c->where = where;
    return MF_OK;
}

mf_status mf_recommend(mf_ctx *ctx, const mf_model *model, int64_t n, const int32_t *users,
                       const mf_sparse *exclude, int N, int32_t *out_items, float *out_scores)
{
    static const char fn[] = "mf_recommend";
    mf_rec_call c;
    MF_TRY(check_call(ctx, model, n, users, N, out_items, out_scores, fn, "users", &c));
    if (exclude) {
        MF_REQUIRE(ctx, exclude->ctx == ctx, "%s: exclude belongs to another context", fn);
        MF_REQUIRE(ctx, exclude->cols == c.model.items,
                   "%s: exclude has %d columns but the model has %d items", fn, exclude->cols,
                   c.model.items);
    }
    c.kind = MF_REC_USERS;
    c.exclude = (mf_sparse *)exclude; /* caches only */
    MF_TRY(check_ids(ctx, users, n, c.where, -1, fn, "users"));
    return mf_recommend_dispatch(ctx, &c);
}

mf_status mf_similar_items(mf_ctx *ctx, const mf_model *model, int64_t n, const int32_t *items,
                           int N, int32_t *out_items, float *out_scores)
{
    static const char fn[] = "mf_similar_items";
    mf_rec_call c;
    MF_TRY(check_call(ctx, model, n, items, N, out_items, out_scores, fn, "items", &c));
    c.kind = MF_REC_SIMILAR;
    MF_TRY(check_ids(ctx, items, n, c.where, c.model.items, fn, "items"));
    return mf_recommend_dispatch(ctx, &c);
}
