/* The tool started N times by a launcher (torchrun, mpirun, srun): one process per GPU, or
 * per CPU rank over MPI, running one collective fit together. */
#ifndef MFACT_CLI_LAUNCHED_H
#define MFACT_CLI_LAUNCHED_H

#include "cli.h"

/* The tool's context for a collective command (als, sgd, ials, complete). Started once (no
 * launcher, mf_launch_detect): cli_make_ctx. Started as one of N processes: a CUDA context
 * opens on device --device + the local rank and joins the launch's group through NCCL
 * (mf_ctx_join_launched; the rendezvous file is MFACT_RENDEZVOUS, else
 * /tmp/mfact-UID/rendezvous, a directory of the user's alone, where every rank is on one host); a
 * CPU context joins MPI_COMM_WORLD (mf_ctx_set_mpi_comm; MPI is initialized here and finalized at
 * exit), in a tool built with MPI and started by an MPI launcher. Every rank then reads the input
 * and makes the call; only rank 0 writes: the other ranks' stdout goes to /dev/null and they print
 * no progress (MFACT_LOG_ALL_RANKS=1 keeps both), their errors still reach stderr, and
 * cli_write_factors writes nothing there. Prints the
 * failure and returns NULL. */
mf_ctx *cli_make_group_ctx(const char *cmd, const cli_common *c);

/* This process's rank among the launched ones and their number (0 and 1 when started
 * once). */
int cli_launched_rank(void);
int cli_launched_size(void);

/* Whether this process prints no progress: a launched rank other than 0 (unless
 * MFACT_LOG_ALL_RANKS=1). */
bool cli_quiet(void);

/* The tool's exit status rc, after the command: a launched CPU rank that failed aborts the
 * MPI job (MPI_Abort), so that no other rank waits for it. */
int cli_launched_finish(int rc);

#endif
