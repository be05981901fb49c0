/* iALS's CUDA engine in a build without CUDA. */
#include "cuda/cuda_backend.h"
#include "ials/ials_internal.h"

mf_status mf_cuda_ials_engine(const mf_ials_setup *s, mf_ials_engine **out)
{
    (void)out;
    return mf_cuda_absent(s->ctx);
}
