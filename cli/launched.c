#define _DEFAULT_SOURCE
#include "launched.h"

#include "cli_device.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef MFACT_CLI_MPI
#include <mpi.h>
#endif

static int launched_rank, launched_size = 1;
static bool quiet; /* a rank other than 0, without MFACT_LOG_ALL_RANKS=1: prints no progress */
#ifdef MFACT_CLI_MPI
static int joined_mpi; /* this process joined MPI_COMM_WORLD: a failure aborts the job */
#endif

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
    joined_mpi = 1;
    return 0;
}
#endif

/* The processes of this host, where the launcher says (torchrun, Open MPI): 0 unknown. */
static int local_size(void)
{
    static const char *const names[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

/* The default rendezvous, for ranks of one host: a directory of this user's alone under
 * /tmp (another user could plant a file or a FIFO at a fixed path in /tmp itself). */
static int default_rendezvous(const char *cmd, char *path, size_t cap)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/mfact-%ld", (long)geteuid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        cli_error(cmd, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077)) {
        cli_error(cmd, "%s is not a directory of this user's alone: set MFACT_RENDEZVOUS", dir);
        return -1;
    }
    snprintf(path, cap, "%s/rendezvous", dir);
    return 0;
}

/* A CUDA rank: NCCL, rank 0's id through the rendezvous file. */
static int join_nccl(const char *cmd, mf_ctx *ctx, int rank, int size)
{
    char fallback[128];
    const char *rendezvous = getenv("MFACT_RENDEZVOUS");
    if (!rendezvous || !*rendezvous) {
        const int local = local_size();
        if (local > 0 && local < size) {
            cli_error(cmd,
                      "rank %d of %d: the processes span several hosts (%d here): set "
                      "MFACT_RENDEZVOUS to a file on a file system they share",
                      rank, size, local);
            return -1;
        }
        if (default_rendezvous(cmd, fallback, sizeof fallback) != 0)
            return -1;
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
    /* The local rank's device, among those this process sees: a launcher that gives each
     * process one GPU (CUDA_VISIBLE_DEVICES) leaves it device 0. */
    const int devices = cli_device_count();
    on.device = devices > 0 ? (int)((c->device + local) % devices) : c->device + local;
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
    /* Rank 0 prints the results: the others' stdout goes, their errors stay (a failure one
     * rank alone meets must be seen), their progress is not printed (cli_quiet). */
    const char *all = getenv("MFACT_LOG_ALL_RANKS");
    quiet = rank != 0 && !(all && !strcmp(all, "1"));
    if (quiet) {
        fflush(stdout);
        if (!freopen("/dev/null", "w", stdout))
            return ctx; /* the rank still takes part; it only prints */
    }
    return ctx;
}

bool cli_quiet(void)
{
    return quiet;
}

int cli_launched_finish(int rc)
{
#ifdef MFACT_CLI_MPI
    /* A rank that failed alone must not wait in MPI_Finalize (at exit) while the others wait
     * for it inside a collective: the job ends with it. */
    if (joined_mpi && rc != CLI_OK) {
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
#endif
    return rc;
}
