#include "core/staging.h"

#include "core/ctx.h"
#include "cuda/cuda_backend.h"

mf_status mf_upload(mf_ctx *ctx, mf_dbuf *buf, const void *src, size_t bytes, const char *what)
{
    MF_TRY(mf_dmem_alloc(ctx, buf, bytes, what));
    mf_status st = mf_cuda_copy(ctx, buf->ptr, src, bytes);
    if (st != MF_OK)
        mf_dmem_free(ctx, buf);
    return st;
}

mf_status mf_stage_output(mf_ctx *ctx, mf_dbuf *buf, const void *src, size_t bytes, int read_old,
                          const char *what)
{
    return read_old ? mf_upload(ctx, buf, src, bytes, what) : mf_dmem_alloc(ctx, buf, bytes, what);
}
