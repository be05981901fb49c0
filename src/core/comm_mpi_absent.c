/* A library built without MPI (MFACT_MPI=OFF, or no MPI found): mf_ctx_set_mpi_comm says
 * so. */
#include "core/comm_mpi.h"

#include "core/error.h"

mf_status mf_comm_mpi_join(mf_ctx *ctx, const char *fn, const void *mpi_comm, mf_status st,
                           mf_comm **out)
{
    (void)mpi_comm;
    (void)out;
    if (st != MF_OK)
        return st;
    return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                   "%s: this build of mfact has no MPI (configure it with MPI installed, "
                   "-DMFACT_MPI=ON)",
                   fn);
}
