/* Public mf_sparse functions: argument checks, staging of device inputs, read-back. */
#include "core/sparse.h"

#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "cuda/cuda_backend.h"

#define MF_SPARSE_KNOWN_FLAGS                                                                      \
    ((unsigned)(MF_SPARSE_SUM_DUPLICATES | MF_SPARSE_PATTERN | MF_SPARSE_KEEP_LAST))

static mf_status check_common(mf_ctx *ctx, mf_sparse **out, int32_t rows, int32_t cols, int64_t nnz,
                              unsigned flags, const char *fn)
{
    MF_REQUIRE(ctx, out, "%s: out is NULL", fn);
    MF_REQUIRE(ctx, rows > 0 && cols > 0, "%s: the shape %d x %d is not positive", fn, rows, cols);
    MF_REQUIRE(ctx, nnz >= 0, "%s: nnz = %lld is negative", fn, (long long)nnz);
    MF_REQUIRE(ctx, (flags & ~MF_SPARSE_KNOWN_FLAGS) == 0, "%s: unknown flags 0x%x", fn,
               flags & ~MF_SPARSE_KNOWN_FLAGS);
    MF_REQUIRE(ctx, !(flags & MF_SPARSE_SUM_DUPLICATES) || !(flags & MF_SPARSE_KEEP_LAST),
               "%s: MF_SPARSE_SUM_DUPLICATES and MF_SPARSE_KEEP_LAST exclude each other", fn);
    return MF_OK;
}

/* A host copy of a device array (or the host array itself): *host is what to read, *owned
 * is what to free afterwards. */
static mf_status stage(mf_ctx *ctx, const void *src, size_t bytes, mf_memory where,
                       const void **host, void **owned, const char *fn)
{
    *owned = NULL;
    *host = src;
    if (where == MF_MEMORY_HOST || !src || bytes == 0)
        return MF_OK;
    void *p = malloc(bytes);
    if (!p)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory staging %zu bytes", fn,
                       bytes);
    mf_status st = mf_cuda_copy(ctx, p, src, bytes);
    if (st != MF_OK) {
        free(p);
        return st;
    }
    *owned = p;
    *host = p;
    return MF_OK;
}

mf_status mf_sparse_from_coo(mf_ctx *ctx, mf_sparse **out, int32_t rows, int32_t cols, int64_t nnz,
                             const int32_t *row, const int32_t *col, const float *val,
                             mf_memory where, unsigned flags)
{
    static const char fn[] = "mf_sparse_from_coo";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_TRY(check_common(ctx, out, rows, cols, nnz, flags, fn));
    MF_TRY(mf_check_where(ctx, where, fn));
    if (flags & MF_SPARSE_PATTERN)
        val = NULL; /* a pattern: the values are not read */
    if (nnz > 0) {
        MF_REQUIRE(ctx, row && col, "%s: row or col is NULL", fn);
        MF_TRY(mf_check_memory(ctx, row, where, fn, "row"));
        MF_TRY(mf_check_memory(ctx, col, where, fn, "col"));
        if (val)
            MF_TRY(mf_check_memory(ctx, val, where, fn, "val"));
    }
    size_t n = (size_t)nnz;
    const void *h_row, *h_col, *h_val;
    void *o_row = NULL, *o_col = NULL, *o_val = NULL;
    mf_status st = stage(ctx, row, n * sizeof *row, where, &h_row, &o_row, fn);
    if (st == MF_OK)
        st = stage(ctx, col, n * sizeof *col, where, &h_col, &o_col, fn);
    if (st == MF_OK)
        st = stage(ctx, val, n * sizeof *val, where, &h_val, &o_val, fn);
    if (st == MF_OK) {
        mf_coo_view coo = {rows, cols, nnz, h_row, h_col, h_val};
        st = mf_coo_validate(ctx, &coo, fn);
        if (st == MF_OK)
            st = mf_sparse_build_coo(ctx, out, &coo, flags, fn, NULL);
    }
    free(o_row);
    free(o_col);
    free(o_val);
    return st;
}

mf_status mf_sparse_from_csr(mf_ctx *ctx, mf_sparse **out, int32_t rows, int32_t cols, int64_t nnz,
                             const int64_t *row_ptr, const int32_t *col, const float *val,
                             mf_memory where, unsigned flags)
{
    static const char fn[] = "mf_sparse_from_csr";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_TRY(check_common(ctx, out, rows, cols, nnz, flags, fn));
    MF_TRY(mf_check_where(ctx, where, fn));
    if (flags & MF_SPARSE_PATTERN)
        val = NULL; /* a pattern: the values are not read */
    MF_REQUIRE(ctx, row_ptr, "%s: row_ptr is NULL", fn);
    MF_REQUIRE(ctx, nnz == 0 || col, "%s: col is NULL", fn);
    MF_TRY(mf_check_memory(ctx, row_ptr, where, fn, "row_ptr"));
    if (nnz > 0) {
        MF_TRY(mf_check_memory(ctx, col, where, fn, "col"));
        if (val)
            MF_TRY(mf_check_memory(ctx, val, where, fn, "val"));
    }
    const void *h_ptr, *h_col, *h_val;
    void *o_ptr = NULL, *o_col = NULL, *o_val = NULL;
    mf_status st =
        stage(ctx, row_ptr, ((size_t)rows + 1) * sizeof *row_ptr, where, &h_ptr, &o_ptr, fn);
    if (st == MF_OK)
        st = stage(ctx, col, (size_t)nnz * sizeof *col, where, &h_col, &o_col, fn);
    if (st == MF_OK)
        st = stage(ctx, val, (size_t)nnz * sizeof *val, where, &h_val, &o_val, fn);
    if (st == MF_OK)
        st = mf_csr_validate(ctx, rows, cols, nnz, h_ptr, h_col, h_val, fn);
    if (st == MF_OK)
        st = mf_sparse_build_csr(ctx, out, rows, cols, nnz, h_ptr, h_col, h_val, flags, fn);
    free(o_ptr);
    free(o_col);
    free(o_val);
    return st;
}

mf_status mf_sparse_shape(const mf_sparse *m, int32_t *rows, int32_t *cols, int64_t *nnz)
{
    MF_REQUIRE(NULL, m, "mf_sparse_shape: m is NULL");
    if (rows)
        *rows = m->rows;
    if (cols)
        *cols = m->cols;
    if (nnz)
        *nnz = m->nnz;
    return MF_OK;
}

int mf_sparse_has_values(const mf_sparse *m)
{
    return m ? m->val != NULL : -1;
}

/* Write `bytes` of host data `src` to the caller's `dst` in `where` memory. */
static mf_status deliver(mf_ctx *ctx, void *dst, const void *src, size_t bytes, mf_memory where)
{
    if (where == MF_MEMORY_DEVICE)
        return mf_cuda_copy(ctx, dst, src, bytes);
    memcpy(dst, src, bytes);
    return MF_OK;
}

static mf_status check_outputs(mf_ctx *ctx, mf_memory where, const char *fn, const void *a,
                               const char *an, const void *b, const char *bn, const void *c,
                               const char *cn)
{
    if (a)
        MF_TRY(mf_check_memory(ctx, a, where, fn, an));
    if (b)
        MF_TRY(mf_check_memory(ctx, b, where, fn, bn));
    if (c)
        MF_TRY(mf_check_memory(ctx, c, where, fn, cn));
    return MF_OK;
}

/* A pattern's values delivered to device memory come from a host array of ones, made before
 * anything is delivered (so that running out of host memory leaves the caller's arrays as
 * they were): *ones stays NULL when none is needed. */
static mf_status make_ones(const mf_sparse *m, const float *val, mf_memory where, const char *fn,
                           float **ones)
{
    *ones = NULL;
    if (!val || m->val || where == MF_MEMORY_HOST)
        return MF_OK;
    size_t n = (size_t)m->nnz;
    *ones = malloc(n * sizeof **ones);
    if (!*ones)
        return mf_fail(m->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (size_t i = 0; i < n; i++)
        (*ones)[i] = 1.0f;
    return MF_OK;
}

/* The columns and values of every entry, in canonical order, to the caller's arrays (either
 * may be NULL); a pattern's values are delivered as ones (from make_ones' array on a
 * device). */
static mf_status deliver_cols_vals(const mf_sparse *m, int32_t *col, float *val, mf_memory where,
                                   const float *ones)
{
    size_t n = (size_t)m->nnz;
    if (col)
        MF_TRY(deliver(m->ctx, col, m->col, n * sizeof *col, where));
    if (!val)
        return MF_OK;
    if (m->val)
        return deliver(m->ctx, val, m->val, n * sizeof *val, where);
    if (where == MF_MEMORY_HOST) {
        for (size_t i = 0; i < n; i++)
            val[i] = 1.0f;
        return MF_OK;
    }
    return deliver(m->ctx, val, ones, n * sizeof *val, where);
}

mf_status mf_sparse_get_coo(const mf_sparse *m, int32_t *row, int32_t *col, float *val,
                            mf_memory where)
{
    static const char fn[] = "mf_sparse_get_coo";
    MF_REQUIRE(NULL, m, "%s: m is NULL", fn);
    mf_ctx *ctx = m->ctx;
    /* `where` is checked even when there is nothing to copy, as mf_sparse_get_csr does */
    MF_TRY(mf_check_where(ctx, where, fn));
    if (m->nnz == 0)
        return MF_OK;
    MF_TRY(check_outputs(ctx, where, fn, row, "row", col, "col", val, "val"));
    size_t n = (size_t)m->nnz;
    /* Host memory for device copies first: nothing is delivered until it is all there. */
    float *ones = NULL;
    int32_t *rows = row && where == MF_MEMORY_DEVICE ? malloc(n * sizeof *rows) : row;
    if (row && !rows)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    mf_status st = make_ones(m, val, where, fn, &ones);
    if (st == MF_OK && row) {
        for (int32_t r = 0; r < m->rows; r++)
            for (int64_t i = m->row_ptr[r]; i < m->row_ptr[r + 1]; i++)
                rows[i] = r;
        if (where == MF_MEMORY_DEVICE)
            st = mf_cuda_copy(ctx, row, rows, n * sizeof *rows);
    }
    if (st == MF_OK)
        st = deliver_cols_vals(m, col, val, where, ones);
    if (rows != row)
        free(rows);
    free(ones);
    return st;
}

mf_status mf_sparse_get_csr(const mf_sparse *m, int64_t *row_ptr, int32_t *col, float *val,
                            mf_memory where)
{
    static const char fn[] = "mf_sparse_get_csr";
    MF_REQUIRE(NULL, m, "%s: m is NULL", fn);
    mf_ctx *ctx = m->ctx;
    MF_TRY(check_outputs(ctx, where, fn, row_ptr, "row_ptr", m->nnz ? col : NULL, "col",
                         m->nnz ? val : NULL, "val"));
    float *ones = NULL;
    if (m->nnz > 0)
        MF_TRY(make_ones(m, val, where, fn, &ones));
    mf_status st = MF_OK;
    if (row_ptr)
        st = deliver(ctx, row_ptr, m->row_ptr, ((size_t)m->rows + 1) * sizeof *row_ptr, where);
    if (st == MF_OK && m->nnz > 0)
        st = deliver_cols_vals(m, col, val, where, ones);
    free(ones);
    return st;
}
