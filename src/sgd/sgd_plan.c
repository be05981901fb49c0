/* The visiting plan of an SGD run (see mf_sgd_plan): the ratings copied once into the
 * order the epochs walk, and the chunk boundaries. Built on the host for both engines, so
 * that one worker visits the same sequence on the CPU and on the GPU. */
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "cuda/philox.h"
#include "sgd/sgd_internal.h"
#include "sgd/sgd_rules.h"

/* Philox streams of the shuffles: fixed, so that a seed means one plan. */
#define SGD_ROW_SHUFFLE_STREAM   0x5347445255ull /* + row */
#define SGD_GLOBAL_SHUFFLE_EPOCH 0xffffffffu

void mf_sgd_plan_free(mf_sgd_plan *plan)
{
    free(plan->chunk_begin);
    free(plan->user);
    free(plan->entry);
    memset(plan, 0, sizeof *plan);
}

/* Fisher-Yates over one row's positions perm[0..n), with the row's own Philox stream. */
static void shuffle_row(int64_t *perm, int64_t n, uint64_t seed, int32_t row)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    mf_philox_block blk = {{0, 0, 0, 0}};
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t draw = n - 1 - i;
        if (draw % 4 == 0)
            blk = mf_philox_stream_block(seed, SGD_ROW_SHUFFLE_STREAM + (uint64_t)row,
                                         (uint64_t)draw / 4);
        /* Lemire's multiply-shift: uniform enough for rows far below 2^32 entries. */
        int64_t j = (int64_t)(((uint64_t)blk.v[draw % 4] * (uint64_t)(i + 1)) >> 32);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static mf_status plan_user_chunks(mf_ctx *ctx, const mf_sparse *R, uint64_t seed, mf_sgd_plan *p)
{
    int64_t *first = malloc(((size_t)R->rows + 1) * sizeof *first);
    if (!first)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    first[0] = 0;
    for (int32_t u = 0; u < R->rows; u++) {
        int64_t n = R->row_ptr[u + 1] - R->row_ptr[u];
        first[u + 1] = first[u] + (n + MF_SGD_CHUNK - 1) / MF_SGD_CHUNK;
    }
    p->nchunks = first[R->rows];
    p->chunk_begin = malloc(((size_t)p->nchunks + 1) * sizeof *p->chunk_begin);
    if (!p->chunk_begin) {
        free(first);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    }
    int longest = 0;
    for (int32_t u = 0; u < R->rows; u++) {
        int64_t n = R->row_ptr[u + 1] - R->row_ptr[u];
        longest = n > longest ? (int)(n < 0x7fffffff ? n : 0x7fffffff) : longest;
        for (int64_t c = first[u]; c < first[u + 1]; c++)
            p->chunk_begin[c] = R->row_ptr[u] + (c - first[u]) * MF_SGD_CHUNK;
    }
    p->chunk_begin[p->nchunks] = R->nnz;
    free(first);
    int failed = 0;
#pragma omp parallel num_threads(mf_ctx_threads(ctx))
    {
        int64_t *perm = malloc(((size_t)longest + 1) * sizeof *perm);
        if (!perm) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 256)
        for (int32_t u = 0; u < R->rows; u++) {
            int64_t b = R->row_ptr[u], n = R->row_ptr[u + 1] - b;
            if (!perm)
                continue;
            shuffle_row(perm, n, seed, u);
            for (int64_t q = 0; q < n; q++) {
                p->user[b + q] = u;
                p->entry[b + q].item = R->col[b + perm[q]];
                p->entry[b + q].rating = R->val ? R->val[b + perm[q]] : 1.0f;
            }
        }
        free(perm);
    }
    if (failed)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    return MF_OK;
}

static mf_status plan_ratings(mf_ctx *ctx, const mf_sparse *R, uint64_t seed, mf_sgd_plan *p)
{
    int32_t *row_of = malloc((size_t)(R->nnz ? R->nnz : 1) * sizeof *row_of);
    p->nchunks = (R->nnz + MF_SGD_CHUNK - 1) / MF_SGD_CHUNK;
    p->chunk_begin = malloc(((size_t)p->nchunks + 1) * sizeof *p->chunk_begin);
    if (!row_of || !p->chunk_begin) {
        free(row_of);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    }
    for (int64_t c = 0; c <= p->nchunks; c++)
        p->chunk_begin[c] = c < p->nchunks ? c * MF_SGD_CHUNK : R->nnz;
    const int threads = mf_ctx_threads(ctx);
    (void)threads; /* read by OpenMP alone */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1024)
    for (int32_t u = 0; u < R->rows; u++)
        for (int64_t q = R->row_ptr[u]; q < R->row_ptr[u + 1]; q++)
            row_of[q] = u;
    /* One shuffle of all ratings: a keyed bijection of the positions (sgd_rules.h). */
    mf_sgd_perm perm =
        mf_sgd_perm_make((uint64_t)(R->nnz ? R->nnz : 1), seed, SGD_GLOBAL_SHUFFLE_EPOCH);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t q = 0; q < R->nnz; q++) {
        int64_t src = (int64_t)mf_sgd_perm_apply(&perm, (uint64_t)q);
        p->user[q] = row_of[src];
        p->entry[q].item = R->col[src];
        p->entry[q].rating = R->val ? R->val[src] : 1.0f;
    }
    free(row_of);
    return MF_OK;
}

mf_status mf_sgd_plan_build(mf_ctx *ctx, const mf_sparse *R, mf_sgd_order order, uint64_t seed,
                            mf_sgd_plan *plan)
{
    mf_sgd_plan p = {0};
    p.nnz = R->nnz;
    size_t n = (size_t)(R->nnz ? R->nnz : 1);
    p.user = malloc(n * sizeof *p.user);
    p.entry = malloc(n * sizeof *p.entry);
    mf_status st = MF_OK;
    if (!p.user || !p.entry)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                     "mf_sgd_hogwild_run: out of host memory for the plan of %lld ratings",
                     (long long)R->nnz);
    if (st == MF_OK)
        st = order == MF_SGD_ORDER_RATINGS ? plan_ratings(ctx, R, seed, &p)
                                           : plan_user_chunks(ctx, R, seed, &p);
    if (st != MF_OK) {
        mf_sgd_plan_free(&p);
        return st;
    }
    *plan = p;
    return MF_OK;
}
