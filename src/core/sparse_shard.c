/* Shards and parts. A group's rank keeps a shard of the ratings (mf_sparse_block): the rows it
 * solves on the users' side, the columns it solves on the items' side. Built from the whole matrix,
 * in its order, so that each line's entries come in the same order as in R and the shard's systems
 * are the whole matrix's bit for bit. */
#include <stdlib.h>

#include "core/ctx.h"
#include "core/row_blocks.h"
#include "core/sparse.h"

mf_status mf_sparse_block(mf_ctx *ctx, const mf_sparse *R, int side, int32_t lo, int32_t hi,
                          const char *fn, mf_sparse **out)
{
    *out = NULL;
    if (side == 0) { /* rows [lo, hi): one contiguous run of R's arrays */
        const int64_t first = R->row_ptr[lo], n = R->row_ptr[hi] - first;
        int64_t *ptr = calloc((size_t)R->rows + 1, sizeof *ptr);
        if (!ptr)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for a shard", fn);
        for (int32_t r = lo; r < R->rows; r++)
            ptr[r + 1] = r < hi ? R->row_ptr[r + 1] - first : n;
        mf_status st = mf_sparse_build_csr(ctx, out, R->rows, R->cols, n, ptr, R->col + first,
                                           R->val ? R->val + first : NULL, 0, fn);
        free(ptr);
        return st;
    }
    /* Columns [lo, hi): each thread counts the entries of its block of rows, then copies
     * them to its own offset, so the shard keeps R's order (two passes over R on every
     * thread: R may hold billions of entries). */
    const int threads = mf_ctx_threads(ctx) > 0 ? mf_ctx_threads(ctx) : 1;
    int64_t *ptr = calloc((size_t)R->rows + 1, sizeof *ptr);
    int64_t *from = calloc((size_t)threads + 1, sizeof *from);
    if (!ptr || !from) {
        free(ptr), free(from);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for a shard", fn);
    }
    int32_t *col = NULL;
    float *val = NULL;
    int failed = 0;
    int64_t n = 0; /* the shard's entries */
#pragma omp parallel num_threads(threads) if (R->nnz > 4096)
    {
        const mf_row_block blk = mf_row_block_of(R->rows);
        const int t = blk.t, nt = blk.nt;
        const int32_t r0 = blk.r0, r1 = blk.r1;
        int64_t mine = 0;
        for (int32_t r = r0; r < r1; r++) {
            for (int64_t p = R->row_ptr[r]; p < R->row_ptr[r + 1]; p++)
                mine += R->col[p] >= lo && R->col[p] < hi;
            ptr[r + 1] = mine; /* within the thread's block, shifted below */
        }
        from[t + 1] = mine;
#pragma omp barrier
#pragma omp single
        {
            for (int u = 0; u < nt; u++)
                from[u + 1] += from[u];
            n = from[nt];
            const size_t cap = (size_t)(n ? n : 1);
            col = malloc(cap * sizeof *col);
            val = R->val ? malloc(cap * sizeof *val) : NULL;
            failed = !col || (R->val && !val);
        }
        if (!failed) {
            int64_t q = from[t];
            for (int32_t r = r0; r < r1; r++) {
                for (int64_t p = R->row_ptr[r]; p < R->row_ptr[r + 1]; p++)
                    if (R->col[p] >= lo && R->col[p] < hi) {
                        col[q] = R->col[p];
                        if (val)
                            val[q] = R->val[p];
                        q++;
                    }
                ptr[r + 1] += from[t];
            }
        }
    }
    mf_status st = MF_OK;
    if (failed)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                     "%s: out of host memory for a shard of %lld entries", fn, (long long)n);
    else
        st = mf_sparse_build_csr(ctx, out, R->rows, R->cols, n, ptr, col, val, 0, fn);
    free(ptr), free(from), free(col), free(val);
    return st;
}

mf_status mf_sparse_set_part(mf_sparse *m, int is_part)
{
    MF_REQUIRE(NULL, m, "mf_sparse_set_part: m is NULL");
    MF_REQUIRE(m->ctx, is_part == 0 || is_part == 1,
               "mf_sparse_set_part: is_part = %d is not 0 or 1", is_part);
    m->is_part = is_part;
    return MF_OK;
}

int mf_sparse_is_part(const mf_sparse *m)
{
    return m ? m->is_part : -1;
}

mf_status mf_sparse_rows_local(mf_ctx *ctx, const mf_sparse *R, int32_t lo, int32_t hi,
                               const char *fn, mf_sparse **out)
{
    *out = NULL;
    const int64_t first = R->row_ptr[lo], n = R->row_ptr[hi] - first;
    int64_t *ptr = malloc(((size_t)(hi - lo) + 1) * sizeof *ptr);
    if (!ptr)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for a shard", fn);
    for (int32_t r = lo; r <= hi; r++)
        ptr[r - lo] = R->row_ptr[r] - first;
    mf_status st = mf_sparse_build_csr(ctx, out, hi - lo, R->cols, n, ptr, R->col + first,
                                       R->val ? R->val + first : NULL, 0, fn);
    free(ptr);
    return st;
}
