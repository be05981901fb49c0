/* The rendezvous of launched processes (launch.c), apart from NCCL so that the CPU tests
 * can run it across processes. */
#ifndef MF_CORE_LAUNCH_H
#define MF_CORE_LAUNCH_H

#include "cuda/comm.h"
#include "mfact/mfact.h"

/* Rank 0 publishes id at path (exclusively, whole, with this launch's token: launch.c);
 * any other rank waits for this launch's id there, up to timeout_seconds (<= 0: 300),
 * into id. The failure is recorded on ctx. */
mf_status mf_launch_share_id(mf_ctx *ctx, const char *path, int rank, double timeout_seconds,
                             unsigned char id[MF_NCCL_ID_BYTES]);

#endif
