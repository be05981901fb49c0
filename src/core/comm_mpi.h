/* The exchange of cuda/comm.h over MPI, for CPU contexts in several processes
 * (mf_ctx_set_mpi_comm): comm_mpi.c when the library is built with MPI (MFACT_MPI), else
 * comm_mpi_absent.c, whose join says so. */
#ifndef MF_CORE_COMM_MPI_H
#define MF_CORE_COMM_MPI_H

#include "cuda/comm.h"

/* Collective over the caller's communicator (mpi_comm points to its MPI_Comm; every rank of
 * it calls this at once): duplicates it, so that the library's traffic never meets the
 * caller's, and makes this process's rank over the duplicate into *out. st is this rank's
 * status so far (the checks of ctx made by the caller, recorded on ctx): the ranks agree
 * over the duplicate first, and when any rank's st or its own setting up failed, every rank
 * fails (a failed rank with its own status and message, the others with "fn: rank r of n
 * failed") and the duplicate is freed. ctx may be NULL when st is not MF_OK. MPI's own
 * state is checked before anything collective: without MPI_Init (or after
 * MPI_Finalize), MF_ERR_UNSUPPORTED on this rank alone. The rank lets go of the duplicate
 * (MPI_Comm_free) in its release. */
mf_status mf_comm_mpi_join(mf_ctx *ctx, const char *fn, const void *mpi_comm, mf_status st,
                           mf_comm **out);

#endif
