/* Device copies of a matrix, made once through the context's memory manager and kept on
 * the handle, so repeated algorithm calls on one matrix upload nothing. */
#include <stdlib.h>

#include "core/ctx.h"
#include "core/sparse.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"

mf_status mf_sparse_device_csr(mf_sparse *m, const int64_t **row_ptr, const int32_t **col,
                               const float **val)
{
    mf_ctx *ctx = m->ctx;
    if (ctx->backend != MF_BACKEND_CUDA)
        return mf_fail(ctx, MF_ERR_INTERNAL, "device CSR requested on a CPU context");
    if (!m->device.row_ptr.ptr) {
        size_t n = (size_t)m->nnz;
        mf_status st = mf_upload(ctx, &m->device.row_ptr, m->row_ptr,
                                 ((size_t)m->rows + 1) * sizeof *m->row_ptr, "CSR row offsets");
        if (st == MF_OK)
            st = mf_upload(ctx, &m->device.col, m->col, n * sizeof *m->col, "CSR column indices");
        if (st == MF_OK && m->val)
            st = mf_upload(ctx, &m->device.val, m->val, n * sizeof *m->val, "CSR values");
        if (st != MF_OK) {
            mf_dmem_free(ctx, &m->device.row_ptr);
            mf_dmem_free(ctx, &m->device.col);
            mf_dmem_free(ctx, &m->device.val);
            return st;
        }
    }
    *row_ptr = m->device.row_ptr.ptr;
    *col = m->device.col.ptr;
    *val = m->device.val.ptr;
    return MF_OK;
}

/* Device arrays derived from the matrix and kept in its cache: the transpose, a pattern's
 * unit values. */
typedef struct derived {
    mf_dbuf a, b, c;
} derived;

static void derived_free(mf_sparse *m, void *value)
{
    derived *d = value;
    mf_dmem_free(m->ctx, &d->a);
    mf_dmem_free(m->ctx, &d->b);
    mf_dmem_free(m->ctx, &d->c);
    free(d);
}

static const char csc_key, ones_key;

/* A new entry for key, filled by fill(); kept only when fill succeeds. */
static mf_status derive(mf_sparse *m, const char *key, mf_status (*fill)(mf_sparse *, derived *),
                        derived **out)
{
    derived *d = mf_sparse_cache_get(m, key);
    if (!d) {
        d = calloc(1, sizeof *d);
        if (!d)
            return mf_fail(m->ctx, MF_ERR_OUT_OF_MEMORY, "out of host memory for a matrix's cache");
        mf_status st = fill(m, d);
        if (st != MF_OK) {
            derived_free(m, d);
            return st;
        }
        MF_TRY(mf_sparse_cache_put(m, key, d, derived_free));
    }
    *out = d;
    return MF_OK;
}

/* The transpose on the device when the device can sort it (a stable sort by column: the
 * same arrays as the host's counting sort, in milliseconds rather than a host pass over
 * every entry); an upload of the host transpose when that exists already or the matrix is
 * beyond the device sort. */
static mf_status fill_csc(mf_sparse *m, derived *d)
{
    mf_ctx *ctx = m->ctx;
    size_t n = (size_t)m->nnz;
    size_t scratch_bytes = mf_cuda_csr_transpose_scratch(m->nnz, m->cols);
    if (!m->transpose.ptr && scratch_bytes > 0) {
        mf_cuda_csr a = {m->rows, m->cols, m->nnz, NULL, NULL, NULL};
        MF_TRY(mf_sparse_device_csr(m, &a.row_ptr, &a.col, &a.val));
        MF_TRY(mf_dmem_alloc(ctx, &d->a, ((size_t)m->cols + 1) * sizeof(int64_t),
                             "CSC column offsets"));
        MF_TRY(mf_dmem_alloc(ctx, &d->b, n * sizeof(int32_t), "CSC row indices"));
        if (m->val)
            MF_TRY(mf_dmem_alloc(ctx, &d->c, n * sizeof(float), "CSC values"));
        mf_dbuf scratch = {NULL, 0};
        MF_TRY(mf_dmem_alloc(ctx, &scratch, scratch_bytes, "the device transpose's scratch"));
        mf_status st = mf_cuda_csr_transpose(ctx, &a, scratch.ptr, d->a.ptr, d->b.ptr, d->c.ptr);
        mf_dmem_free(ctx, &scratch); /* stream-ordered: after the sort */
        return st;
    }
    MF_TRY(mf_sparse_host_transpose(m));
    MF_TRY(mf_upload(ctx, &d->a, m->transpose.ptr, ((size_t)m->cols + 1) * sizeof *m->transpose.ptr,
                     "CSC column offsets"));
    MF_TRY(mf_upload(ctx, &d->b, m->transpose.idx, n * sizeof(int32_t), "CSC row indices"));
    if (m->transpose.val)
        MF_TRY(mf_upload(ctx, &d->c, m->transpose.val, n * sizeof(float), "CSC values"));
    return MF_OK;
}

mf_status mf_sparse_device_csc(mf_sparse *m, const int64_t **col_ptr, const int32_t **row,
                               const float **val)
{
    if (m->ctx->backend != MF_BACKEND_CUDA)
        return mf_fail(m->ctx, MF_ERR_INTERNAL, "device CSC requested on a CPU context");
    derived *d = NULL;
    MF_TRY(derive(m, &csc_key, fill_csc, &d));
    *col_ptr = d->a.ptr;
    *row = d->b.ptr;
    *val = d->c.ptr;
    return MF_OK;
}

static mf_status fill_ones(mf_sparse *m, derived *d)
{
    MF_TRY(mf_dmem_alloc(m->ctx, &d->a, (size_t)m->nnz * sizeof(float), "a pattern's unit values"));
    return mf_cuda_fill(m->ctx, d->a.ptr, 1.0f, m->nnz);
}

mf_status mf_sparse_device_ones(mf_sparse *m, const float **ones)
{
    derived *d = NULL;
    MF_TRY(derive(m, &ones_key, fill_ones, &d));
    *ones = d->a.ptr;
    return MF_OK;
}

void mf_sparse_release_device(mf_sparse *m)
{
    mf_sparse_cache_clear(m);
    mf_dmem_free(m->ctx, &m->device.row_ptr);
    mf_dmem_free(m->ctx, &m->device.col);
    mf_dmem_free(m->ctx, &m->device.val);
}
