/* ALS's CUDA engine in a build without CUDA (its hooks, als_hooks.cu, serve only GPU
 * suites and benches, which such a build does not have). */
#include "als/als_internal.h"
#include "cuda/cuda_backend.h"

mf_status mf_cuda_als_engine(const mf_als_setup *s, mf_als_engine **out)
{
    (void)out;
    return mf_cuda_absent(s->ctx);
}
