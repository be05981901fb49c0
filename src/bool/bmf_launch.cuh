// Launch helpers shared by the Boolean factorization's CUDA files (bmf.cu, bmf_asso.cu).
#ifndef MF_BMF_LAUNCH_CUH
#define MF_BMF_LAUNCH_CUH

#include <stdint.h>

#include "cuda/cuda_internal.h"

// Blocks of per_block threads (or lines) covering n.
static inline unsigned blocks_for(int64_t n, int per_block)
{
    return (unsigned)((n + per_block - 1) / per_block);
}

// The last launch's error, recorded on the context under `what`.
static inline mf_status check_launch(mf_ctx *ctx, const char *what)
{
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, what, __FILE__, __LINE__);
    return MF_OK;
}

#endif
