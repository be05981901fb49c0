/* SpMM's CUDA entry point in a build without CUDA. */
#include "cuda/cuda_backend.h"
#include "spmm/spmm_internal.h"

mf_status mf_cuda_spmm(mf_ctx *ctx, mf_sparse *S, const mf_spmm_call *call)
{
    (void)S;
    (void)call;
    return mf_cuda_absent(ctx);
}
