// What the CUDA SDDMM engine (sddmm.cu) offers its test hooks (sddmm_hooks.cu, built into
// the internal archive only). CUDA C++, private to src/sddmm.
#ifndef MF_SDDMM_ENGINE_CUH
#define MF_SDDMM_ENGINE_CUH

#include "sddmm/sddmm_internal.h"

namespace mf_sddmm_gpu
{

// Run compiled variant v (sddmm_tuning.h) on the layout of panel width tj and about
// block_nnz entries per block, grouped or not (sddmm_layout.h), whatever the tuning rules
// would pick; stream-ordered. call->precision picks the instance: FP32 the float one, TF32,
// BF16 and FP16 (SM-L2 vector variants) the one that reads the factors' copies (TF32's scaled
// fp16 copies, the 16-bit copies), or with `registers` the one that rounds the floats as they
// load (16-byte float rows: k % 4 == 0).
mf_status run_variant(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, int v, int32_t tj,
                      int64_t block_nnz, int grouped, bool registers);

} // namespace mf_sddmm_gpu

#endif
