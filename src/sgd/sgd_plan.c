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

/* The rows a plan is built from: R itself, or one block of it (mf_sgd_plan_build_blocks). */
typedef struct csr_view {
    int32_t rows;
    int64_t nnz;
    const int64_t *row_ptr;
    const int32_t *col;
    const float *val;
} csr_view;

static mf_status plan_user_chunks(mf_ctx *ctx, const csr_view *R, uint64_t seed, mf_sgd_plan *p)
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

static mf_status plan_ratings(mf_ctx *ctx, const csr_view *R, uint64_t seed, mf_sgd_plan *p)
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

static mf_status plan_build(mf_ctx *ctx, const csr_view *R, mf_sgd_order order, uint64_t seed,
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

mf_status mf_sgd_plan_build(mf_ctx *ctx, const mf_sparse *R, mf_sgd_order order, uint64_t seed,
                            mf_sgd_plan *plan)
{
    const csr_view v = {R->rows, R->nnz, R->row_ptr, R->col, R->val};
    return plan_build(ctx, &v, order, seed, plan);
}

/* The entries of rows [u0, u1) in columns [i0, i1), as a CSR of all R's rows (the others
 * empty), so that a block's plan keeps R's row numbers and each row's shuffle. */
static mf_status block_of(mf_ctx *ctx, const mf_sparse *R, int32_t u0, int32_t u1, int64_t i0,
                          int64_t i1, csr_view *v, int64_t **ptr, int32_t **col, float **val)
{
    int64_t nnz = 0;
    for (int32_t u = u0; u < u1; u++)
        for (int64_t q = R->row_ptr[u]; q < R->row_ptr[u + 1]; q++)
            nnz += R->col[q] >= i0 && R->col[q] < i1;
    *ptr = malloc(((size_t)R->rows + 1) * sizeof **ptr);
    *col = malloc(((size_t)nnz + 1) * sizeof **col);
    *val = R->val ? malloc(((size_t)nnz + 1) * sizeof **val) : NULL;
    if (!*ptr || !*col || (R->val && !*val))
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    int64_t at = 0;
    for (int32_t u = 0; u < R->rows; u++) {
        (*ptr)[u] = at;
        if (u < u0 || u >= u1)
            continue;
        for (int64_t q = R->row_ptr[u]; q < R->row_ptr[u + 1]; q++)
            if (R->col[q] >= i0 && R->col[q] < i1) {
                (*col)[at] = R->col[q];
                if (R->val)
                    (*val)[at] = R->val[q];
                at++;
            }
    }
    (*ptr)[R->rows] = at;
    *v = (csr_view){R->rows, nnz, *ptr, *col, *val};
    return MF_OK;
}

/* parts's plan appended to p (whose arrays grow), its chunks shifted past p's. */
static mf_status append(mf_ctx *ctx, mf_sgd_plan *p, const mf_sgd_plan *part)
{
    const size_t nnz = (size_t)(p->nnz + part->nnz), chunks = (size_t)(p->nchunks + part->nchunks);
    int32_t *user = realloc(p->user, (nnz ? nnz : 1) * sizeof *user);
    if (user)
        p->user = user;
    mf_sgd_entry *entry = realloc(p->entry, (nnz ? nnz : 1) * sizeof *entry);
    if (entry)
        p->entry = entry;
    int64_t *begin = realloc(p->chunk_begin, (chunks + 1) * sizeof *begin);
    if (begin)
        p->chunk_begin = begin;
    if (!user || !entry || !begin)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    memcpy(p->user + p->nnz, part->user, (size_t)part->nnz * sizeof *user);
    memcpy(p->entry + p->nnz, part->entry, (size_t)part->nnz * sizeof *entry);
    for (int64_t c = 0; c <= part->nchunks; c++)
        p->chunk_begin[p->nchunks + c] = p->nnz + part->chunk_begin[c];
    p->nnz += part->nnz;
    p->nchunks += part->nchunks;
    return MF_OK;
}

mf_status mf_sgd_plan_build_blocks(mf_ctx *ctx, const mf_sparse *R, mf_sgd_order order,
                                   uint64_t seed, int32_t u0, int32_t u1,
                                   const int64_t *item_bounds, int blocks, mf_sgd_plan *plan,
                                   int64_t *parts)
{
    mf_sgd_plan p = {0};
    p.chunk_begin = calloc(1, sizeof *p.chunk_begin);
    mf_status st = p.chunk_begin ? MF_OK
                                 : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                           "mf_sgd_hogwild_run: out of host memory");
    parts[0] = 0;
    for (int b = 0; st == MF_OK && b < blocks; b++) {
        csr_view v;
        int64_t *ptr = NULL;
        int32_t *col = NULL;
        float *val = NULL;
        mf_sgd_plan part = {0};
        st = block_of(ctx, R, u0, u1, item_bounds[b], item_bounds[b + 1], &v, &ptr, &col, &val);
        if (st == MF_OK)
            st = plan_build(ctx, &v, order, seed, &part);
        if (st == MF_OK)
            st = append(ctx, &p, &part);
        parts[b + 1] = p.nchunks;
        mf_sgd_plan_free(&part);
        free(ptr);
        free(col);
        free(val);
    }
    if (st != MF_OK) {
        mf_sgd_plan_free(&p);
        return st;
    }
    *plan = p;
    return MF_OK;
}
