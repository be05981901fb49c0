#include "launched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef MFACT_CLI_MPI
#include <mpi.h>
#endif

static int launched_rank, launched_size = 1;

int cli_launched_rank(void)
{
    return launched_rank;
}

int cli_launched_size(void)
{
    return launched_size;
}

#ifdef MFACT_CLI_MPI
static void finalize_mpi(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done)
        MPI_Finalize();
}

/* A CPU rank: MPI_COMM_WORLD, which must be the launch the environment describes (under a
 * launcher that is not MPI's, MPI_Init makes a world of one). */
static int join_mpi(const char *cmd, mf_ctx *ctx, int rank, int size)
{
    int ready = 0, provided = 0;
    MPI_Initialized(&ready);
    if (!ready) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            cli_error(cmd, "rank %d of %d: MPI_Init failed", rank, size);
            return -1;
        }
        atexit(finalize_mpi);
    }
    int world_rank = -1, world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_rank != rank || world_size != size) {
        cli_error(cmd,
                  "rank %d of %d: MPI's world is rank %d of %d: CPU processes need an MPI "
                  "launcher (mpirun, srun with PMI)",
                  rank, size, world_rank, world_size);
        return -1;
    }
    MPI_Comm world = MPI_COMM_WORLD;
    if (mf_ctx_set_mpi_comm(ctx, &world) != MF_OK) {
        cli_error(cmd, "rank %d of %d: %s", rank, size, mf_ctx_last_error(ctx));
        return -1;
    }
    return 0;
}
#endif

/* A CUDA rank: NCCL, rank 0's id through the rendezvous file. */
static int join_nccl(const char *cmd, mf_ctx *ctx, int rank, int size)
{
    char fallback[64];
    const char *rendezvous = getenv("MFACT_RENDEZVOUS");
    if (!rendezvous || !*rendezvous) {
        snprintf(fallback, sizeof fallback, "/tmp/mfact-rendezvous.%ld", (long)getuid());
        rendezvous = fallback;
    }
    if (mf_ctx_join_launched(ctx, rendezvous, 0.0) != MF_OK) {
        cli_error(cmd, "rank %d of %d: %s", rank, size, mf_ctx_last_error(ctx));
        return -1;
    }
    return 0;
}

mf_ctx *cli_make_group_ctx(const char *cmd, const cli_common *c)
{
    int rank, size, local;
    if (mf_launch_detect(&rank, &size, &local) != MF_OK) {
        cli_error(cmd, "%s", mf_ctx_last_error(NULL));
        return NULL;
    }
    if (size == 1)
        return cli_make_ctx(cmd, c);
    cli_common on = *c;
    on.device = c->device + local;
    mf_ctx *ctx = cli_make_ctx(cmd, &on);
    if (!ctx)
        return NULL;
    int joined;
    if (mf_ctx_backend(ctx) == MF_BACKEND_CUDA)
        joined = join_nccl(cmd, ctx, rank, size);
#ifdef MFACT_CLI_MPI
    else
        joined = join_mpi(cmd, ctx, rank, size);
#else
    else {
        cli_error(cmd,
                  "rank %d of %d: a CPU context joins other processes through MPI, and this "
                  "mfact was built without it (MFACT_MPI)",
                  rank, size);
        joined = -1;
    }
#endif
    if (joined != 0) {
        mf_ctx_destroy(ctx);
        return NULL;
    }
    launched_rank = rank, launched_size = size;
    const char *all = getenv("MFACT_LOG_ALL_RANKS");
    if (rank != 0 && !(all && !strcmp(all, "1"))) {
        fflush(NULL);
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            return ctx; /* the rank still takes part; it only prints */
    }
    return ctx;
}
