/* The in-process stand-in communicator (comm_local.c). */
#ifndef MF_CORE_COMM_LOCAL_H
#define MF_CORE_COMM_LOCAL_H

#include "cuda/comm.h"

/* n ranks of one group, out[0..n); the failure, if any, is recorded on ctx. Each rank is
 * let go with its ops->release; the group goes with the last. */
mf_status mf_comm_local_create(mf_ctx *ctx, int n, mf_comm **out);

#endif
