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

mf_status mf_fill_output(mf_ctx *ctx, float *out, int64_t n, float value, mf_memory where)
{
    if (!out || n <= 0)
        return MF_OK;
    if (where == MF_MEMORY_HOST) {
        for (int64_t i = 0; i < n; i++)
            out[i] = value;
        return MF_OK;
    }
    MF_TRY(mf_cuda_fill(ctx, out, value, n));
    return mf_cuda_sync(ctx);
}
