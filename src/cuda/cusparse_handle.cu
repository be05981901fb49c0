// The context's cuSPARSE handle: made on the first call that needs it (most contexts never
// do), rebound to the context's current stream on every use.
#include <cusparse.h>

#include "cuda/cuda_internal.h"

mf_status mf_cuda_cusparse(mf_ctx *ctx, void **handle)
{
    mf_cuda *c = ctx->cuda;
    if (!c->cusparse) {
        cusparseHandle_t h;
        cusparseStatus_t s = cusparseCreate(&h);
        if (s != CUSPARSE_STATUS_SUCCESS)
            return mf_fail(ctx,
                           s == CUSPARSE_STATUS_ALLOC_FAILED ? MF_ERR_OUT_OF_MEMORY : MF_ERR_CUDA,
                           "cusparseCreate failed: %s", cusparseGetErrorString(s));
        c->cusparse = h;
    }
    cusparseStatus_t s = cusparseSetStream((cusparseHandle_t)c->cusparse, c->stream);
    if (s != CUSPARSE_STATUS_SUCCESS)
        return mf_fail(ctx, MF_ERR_CUDA, "cusparseSetStream failed: %s", cusparseGetErrorString(s));
    *handle = c->cusparse;
    return MF_OK;
}

void mf_cuda_cusparse_destroy(mf_cuda *c)
{
    if (c->cusparse)
        cusparseDestroy((cusparseHandle_t)c->cusparse);
    c->cusparse = NULL;
}
