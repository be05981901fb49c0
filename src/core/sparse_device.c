/* Device copies of a matrix, made once through the context's memory manager and kept on
 * the handle, so repeated algorithm calls on one matrix upload nothing. */
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

mf_status mf_sparse_device_csc(mf_sparse *m, const int64_t **col_ptr, const int32_t **row,
                               const float **val)
{
    mf_ctx *ctx = m->ctx;
    if (ctx->backend != MF_BACKEND_CUDA)
        return mf_fail(ctx, MF_ERR_INTERNAL, "device CSC requested on a CPU context");
    if (!m->device.t_ptr.ptr) {
        MF_TRY(mf_sparse_host_transpose(m));
        size_t n = (size_t)m->nnz;
        mf_status st =
            mf_upload(ctx, &m->device.t_ptr, m->transpose.ptr,
                      ((size_t)m->cols + 1) * sizeof *m->transpose.ptr, "CSC column offsets");
        if (st == MF_OK)
            st = mf_upload(ctx, &m->device.t_idx, m->transpose.idx, n * sizeof(int32_t),
                           "CSC row indices");
        if (st == MF_OK && m->transpose.val)
            st =
                mf_upload(ctx, &m->device.t_val, m->transpose.val, n * sizeof(float), "CSC values");
        if (st != MF_OK) {
            mf_dmem_free(ctx, &m->device.t_ptr);
            mf_dmem_free(ctx, &m->device.t_idx);
            mf_dmem_free(ctx, &m->device.t_val);
            return st;
        }
    }
    *col_ptr = m->device.t_ptr.ptr;
    *row = m->device.t_idx.ptr;
    *val = m->device.t_val.ptr;
    return MF_OK;
}

mf_status mf_sparse_device_ones(mf_sparse *m, const float **ones)
{
    mf_ctx *ctx = m->ctx;
    if (!m->device.ones.ptr && m->nnz > 0) {
        MF_TRY(mf_dmem_alloc(ctx, &m->device.ones, (size_t)m->nnz * sizeof(float),
                             "a pattern's unit values"));
        mf_status st = mf_cuda_fill(ctx, m->device.ones.ptr, 1.0f, m->nnz);
        if (st != MF_OK) {
            mf_dmem_free(ctx, &m->device.ones);
            mf_dmem_free(ctx, &m->device.row_ptr32);
            return st;
        }
    }
    *ones = m->device.ones.ptr;
    return MF_OK;
}

void mf_sparse_release_device(mf_sparse *m)
{
    mf_ctx *ctx = m->ctx;
    mf_cuda_sddmm_plan_free(m);
    mf_dmem_free(ctx, &m->device.ones);
    mf_dmem_free(ctx, &m->device.row_ptr32);
    mf_dmem_free(ctx, &m->device.row_ptr);
    mf_dmem_free(ctx, &m->device.col);
    mf_dmem_free(ctx, &m->device.val);
    mf_dmem_free(ctx, &m->device.t_ptr);
    mf_dmem_free(ctx, &m->device.t_idx);
    mf_dmem_free(ctx, &m->device.t_val);
}
