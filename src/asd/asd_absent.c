/* ASD's CUDA engine in a build without CUDA: every context is a CPU context there, so this
 * is never reached; it exists so that the driver links. */
#include "asd/asd_internal.h"
#include "core/ctx.h"

mf_status mf_cuda_asd_engine(const mf_asd_setup *s, mf_asd_engine **out)
{
    (void)out;
    return mf_fail(s->ctx, MF_ERR_UNSUPPORTED, "mf_asd_run: mfact was built without CUDA");
}
