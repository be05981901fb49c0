// SDDMM's test hook (sddmm_internal.h): built into the internal archive that tests link,
// never into libmfact.so.
#include "core/ctx.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm_engine.cuh"

extern "C" mf_status mf_cuda_sddmm_variant(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call,
                                           int v, int32_t tj, int64_t block_nnz, int flags)
{
    mf_device_guard guard(ctx->link.cuda->device);
    MF_TRY(mf_sddmm_gpu::run_variant(ctx, S, call, v, tj, block_nnz,
                                     (flags & MF_SDDMM_HOOK_GROUPED) != 0,
                                     (flags & MF_SDDMM_HOOK_REGISTERS) != 0));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(ctx->link.cuda->stream));
    return MF_OK;
}
