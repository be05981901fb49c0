/* SGD's CUDA engine in a build without CUDA. */
#include "cuda/cuda_backend.h"
#include "sgd/sgd_internal.h"

mf_status mf_cuda_sgd_engine(const mf_sgd_setup *s, mf_sgd_engine **out)
{
    (void)out;
    return mf_cuda_absent(s->ctx);
}
