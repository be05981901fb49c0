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

#endif
