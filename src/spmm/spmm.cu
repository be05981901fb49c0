// mf_spmm on the GPU: cuSPARSE's generic SpMM on the matrix's cached device CSR, with dense
// operands described as row-major. cuSPARSE takes 32-bit row offsets here (mixing 64-bit
// offsets with 32-bit columns is not supported by every SpMM algorithm), kept beside the
// 64-bit ones in the matrix's cache.
#include <stdlib.h>

#include "core/ctx.h"
#include "core/sparse.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"
#include "cuda/cusparse_api.h"
#include "spmm/spmm_internal.h"

// `fn` names a member of sp, the loaded cuSPARSE (cusparse_api.h).
#define MF_CUSPARSE_TRY(ctx, fn, ...)                                                              \
    do {                                                                                           \
        cusparseStatus_t mf_sp_ = sp->fn(__VA_ARGS__);                                             \
        if (mf_sp_ != CUSPARSE_STATUS_SUCCESS) {                                                   \
            st = mf_fail((ctx),                                                                    \
                         mf_sp_ == CUSPARSE_STATUS_ALLOC_FAILED ? MF_ERR_OUT_OF_MEMORY             \
                                                                : MF_ERR_CUDA,                     \
                         "cuSPARSE %s failed: %s (%s:%d)", #fn, sp->error_string(mf_sp_),          \
                         __FILE__, __LINE__);                                                      \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

__global__ void narrow_offsets(const int64_t *in, int32_t *out, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = (int32_t)in[i];
}

// cuSPARSE takes 32-bit offsets here: a narrowed copy of the row offsets, kept in the
// matrix's cache under this key.
static const char offsets32_key = 0;

static void offsets32_free(mf_sparse *S, void *value)
{
    mf_dbuf *buf = (mf_dbuf *)value;
    mf_dmem_free(S->ctx, buf);
    free(buf);
}

static mf_status offsets32(mf_ctx *ctx, mf_sparse *S, const int64_t *row_ptr, const int32_t **out)
{
    mf_dbuf *buf = (mf_dbuf *)mf_sparse_cache_get(S, &offsets32_key);
    if (!buf) {
        if (S->nnz > INT32_MAX)
            return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                           "mf_spmm: %lld entries exceed cuSPARSE's 32-bit offsets here",
                           (long long)S->nnz);
        buf = (mf_dbuf *)calloc(1, sizeof *buf);
        if (!buf)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_spmm: out of host memory");
        int64_t n = (int64_t)S->rows + 1;
        mf_status st =
            mf_dmem_alloc(ctx, buf, (size_t)n * sizeof(int32_t), "32-bit CSR row offsets");
        if (st == MF_OK) {
            narrow_offsets<<<mf_cuda_grid(ctx->link.cuda, n, 256, 8), 256, 0,
                             ctx->link.cuda->stream>>>(row_ptr, (int32_t *)buf->ptr, n);
            st = MF_CUDA_LAUNCHED(ctx, "narrow_offsets");
        }
        if (st != MF_OK) {
            offsets32_free(S, buf);
            return st;
        }
        MF_TRY(mf_sparse_cache_put(S, &offsets32_key, buf, offsets32_free));
    }
    *out = (const int32_t *)buf->ptr;
    return MF_OK;
}

extern "C" mf_status mf_cuda_spmm(mf_ctx *ctx, mf_sparse *S, const mf_spmm_call *c)
{
    mf_device_guard guard(ctx->link.cuda->device);
    const int64_t *row_ptr;
    const int32_t *col = NULL, *ptr32 = NULL;
    const float *val;
    MF_TRY(mf_sparse_device_csr(S, &row_ptr, &col, &val));
    if (!val)
        MF_TRY(mf_sparse_device_ones(S, &val));
    MF_TRY(offsets32(ctx, S, row_ptr, &ptr32));
    void *handle = NULL;
    const mf_cusparse_api *sp = NULL;
    MF_TRY(mf_cuda_cusparse(ctx, &handle, &sp));
    cusparseHandle_t h = (cusparseHandle_t)handle;

    const int64_t p = c->op == MF_OP_N ? S->rows : S->cols;
    const int64_t q = c->op == MF_OP_N ? S->cols : S->rows;
    const cusparseOperation_t op =
        c->op == MF_OP_N ? CUSPARSE_OPERATION_NON_TRANSPOSE : CUSPARSE_OPERATION_TRANSPOSE;
    mf_status st = MF_OK;
    cusparseSpMatDescr_t a = NULL;
    cusparseDnMatDescr_t x = NULL, y = NULL;
    size_t bytes = 0;
    mf_dbuf work = {0, 0};
    MF_CUSPARSE_TRY(ctx, create_csr, &a, S->rows, S->cols, S->nnz, (void *)ptr32, (void *)col,
                    (void *)val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                    CUDA_R_32F);
    MF_CUSPARSE_TRY(ctx, create_dn_mat, &x, q, c->n, c->ldx, (void *)c->X, CUDA_R_32F,
                    CUSPARSE_ORDER_ROW);
    MF_CUSPARSE_TRY(ctx, create_dn_mat, &y, p, c->n, c->ldy, c->Y, CUDA_R_32F, CUSPARSE_ORDER_ROW);
    MF_CUSPARSE_TRY(ctx, spmm_buffer_size, h, op, CUSPARSE_OPERATION_NON_TRANSPOSE, &c->alpha, a, x,
                    &c->beta, y, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &bytes);
    st = mf_dmem_alloc(ctx, &work, bytes, "cuSPARSE SpMM workspace");
    if (st != MF_OK)
        goto done;
    MF_CUSPARSE_TRY(ctx, spmm, h, op, CUSPARSE_OPERATION_NON_TRANSPOSE, &c->alpha, a, x, &c->beta,
                    y, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, work.ptr);
    {
        cudaError_t err = cudaStreamSynchronize(ctx->link.cuda->stream);
        if (err != cudaSuccess)
            st = mf_cuda_fail(ctx, err, "cusparseSpMM", __FILE__, __LINE__);
    }
done:
    if (a)
        sp->destroy_sp_mat(a);
    if (x)
        sp->destroy_dn_mat(x);
    if (y)
        sp->destroy_dn_mat(y);
    mf_dmem_free(ctx, &work);
    return st;
}
