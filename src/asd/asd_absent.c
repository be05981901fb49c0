/* ASD's CUDA engine is not written yet: a CUDA context gets a clear MF_ERR_UNSUPPORTED,
 * never a silent CPU run. (Without CUDA every context is a CPU context: never called.) */
#include "asd/asd_internal.h"
#include "core/ctx.h"

mf_status mf_cuda_asd_engine(const mf_asd_setup *s, mf_asd_engine **out)
{
    (void)out;
    return mf_fail(s->ctx, MF_ERR_UNSUPPORTED,
                   "mf_asd_run: the CUDA engine is not built yet; use a CPU context");
}
