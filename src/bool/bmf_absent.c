/* The Boolean factorization's CUDA engine and Asso start in a build without CUDA. */
#include "bool/bmf_asso.h"
#include "bool/bmf_internal.h"
#include "cuda/cuda_backend.h"

mf_status mf_cuda_bmf_engine(const mf_bmf_setup *s, mf_bmf_engine **out)
{
    (void)out;
    return mf_cuda_absent(s->ctx);
}

mf_status mf_cuda_bmf_asso(const mf_bmf_asso_plan *p, uint64_t *A, uint64_t *B)
{
    (void)A;
    (void)B;
    return mf_cuda_absent(p->ctx);
}

void mf_bmf_asso_sparse_debug_narrow(int64_t max)
{
    (void)max;
}

mf_status mf_cuda_bmf_asso_sparse(const mf_bmf_asso_plan *p, const mf_bmf_asso_lists *lists,
                                  uint64_t *A, uint64_t *B)
{
    (void)lists;
    (void)A;
    (void)B;
    return mf_cuda_absent(p->ctx);
}
