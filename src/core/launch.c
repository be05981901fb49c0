/* One process per GPU: the caller's hand-over of rank 0's NCCL id (mf_nccl_make_id,
 * mf_ctx_join_nccl_id), or a launcher's start (mf_launch_detect, mf_ctx_join_launched): the
 * rank, size and local rank the launcher put in the environment, and the hand-over of the
 * id to the other ranks through a rendezvous file. The file is the only thing shared: NCCL
 * itself then connects the ranks (ncclCommInitRank), so mfact carries no transport of its
 * own. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/ranks.h"
#include "cuda/comm.h"

/* The variables of one launcher: rank, size, local rank (NULL: none; the local rank is then
 * the rank). */
typedef struct launcher {
    const char *rank, *size, *local;
} launcher;

/* In the order they are tried: torchrun (and torch.distributed's other launchers), Open
 * MPI, MPICH/Intel MPI (Hydra), and Slurm's srun. Slurm's step variables, not
 * SLURM_NTASKS: a batch script's own step has SLURM_PROCID and SLURM_NTASKS too, and its
 * single process must not wait for ranks that will never come. */
static const launcher launchers[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"},
};

/* The integer in variable `name`, in 0..most: -1 when it is unset, -2 when malformed. */
static long env_int(const char *name, long most)
{
    const char *v = getenv(name);
    if (!v)
        return -1;
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || errno || x < 0 || x > most)
        return -2;
    return x;
}

mf_status mf_launch_detect(int *rank, int *size, int *local_rank)
{
    static const char fn[] = "mf_launch_detect";
    int r = 0, n = 1, local = 0;
    for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++) {
        const launcher *l = &launchers[i];
        const long lr = env_int(l->rank, INT_MAX - 1), ls = env_int(l->size, INT_MAX - 1);
        if (lr == -1 || ls == -1)
            continue; /* not this launcher */
        MF_REQUIRE(NULL, lr >= 0, "%s: %s='%s' is not a rank", fn, l->rank, getenv(l->rank));
        MF_REQUIRE(NULL, ls >= 1, "%s: %s='%s' is not a count of processes", fn, l->size,
                   getenv(l->size));
        MF_REQUIRE(NULL, lr < ls, "%s: %s=%ld is outside 0..%ld (%s)", fn, l->rank, lr, ls - 1,
                   l->size);
        long ll = env_int(l->local, INT_MAX - 1);
        MF_REQUIRE(NULL, ll != -2, "%s: %s='%s' is not a local rank", fn, l->local,
                   getenv(l->local));
        r = (int)lr, n = (int)ls, local = ll >= 0 ? (int)ll : (int)lr;
        break;
    }
    if (rank)
        *rank = r;
    if (size)
        *size = n;
    if (local_rank)
        *local_rank = local;
    return MF_OK;
}

/* What names one launch, so that a rank never takes the id of another (a stale file): the
 * launcher's job id where it gives one, else MFACT_RUN_ID, else nothing. */
static void launch_token(char *out, size_t cap)
{
    static const char *const names[] = {"MFACT_RUN_ID", "TORCHELASTIC_RUN_ID",
                                        "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};
    out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (getenv(names[i]) && *getenv(names[i])) {
            snprintf(out, cap, "%s=%s", names[i], getenv(names[i]));
            return;
        }
    if (getenv("SLURM_JOB_ID"))
        snprintf(out, cap, "SLURM=%s.%s", getenv("SLURM_JOB_ID"),
                 getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : "");
    /* A token is one line: anything unprintable would break the file's format. */
    for (char *p = out; *p; p++)
        if (*p < ' ' || *p > '~')
            *p = '_';
}

#define RENDEZVOUS_MAGIC "mfact-rendezvous 1"
#define TOKEN_CAP        256

/* The file's text: magic, token, the id in hex, one line each. */
static size_t format_rendezvous(char *buf, size_t cap, const char *token,
                                const unsigned char id[MF_NCCL_ID_BYTES])
{
    int n = snprintf(buf, cap, "%s\n%s\n", RENDEZVOUS_MAGIC, token);
    for (int i = 0; i < MF_NCCL_ID_BYTES && n > 0 && (size_t)n + 3 < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%02x", id[i]);
    if (n > 0 && (size_t)n + 1 < cap)
        buf[n++] = '\n';
    return n > 0 ? (size_t)n : 0;
}

/* 1 when text is a whole rendezvous of launch `token` (the id into id), 0 when it is one
 * of another launch or not whole yet. */
static int parse_rendezvous(const char *text, const char *token, unsigned char id[MF_NCCL_ID_BYTES])
{
    const size_t magic = strlen(RENDEZVOUS_MAGIC), tl = strlen(token);
    if (strncmp(text, RENDEZVOUS_MAGIC "\n", magic + 1) != 0)
        return 0;
    text += magic + 1;
    if (strncmp(text, token, tl) != 0 || text[tl] != '\n')
        return 0;
    text += tl + 1;
    for (int i = 0; i < MF_NCCL_ID_BYTES; i++) {
        unsigned v;
        if (sscanf(text + 2 * i, "%2x", &v) != 1)
            return 0;
        id[i] = (unsigned char)v;
    }
    return text[2 * MF_NCCL_ID_BYTES] == '\n';
}

/* Rank 0: publish the id at path, exclusively (a file already there fails) and whole (the
 * text goes to a private file first, then takes the name by link(2), which never
 * replaces a file). */
static mf_status publish(mf_ctx *ctx, const char *path, const char *token,
                         const unsigned char id[MF_NCCL_ID_BYTES])
{
    static const char fn[] = "mf_ctx_join_launched";
    char text[2 * MF_NCCL_ID_BYTES + TOKEN_CAP + 64];
    const size_t len = format_rendezvous(text, sizeof text, token, id);
    char *tmp = malloc(strlen(path) + 32);
    if (!tmp)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    sprintf(tmp, "%s.%ld.tmp", path, (long)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    mf_status st = MF_OK;
    if (fd < 0)
        st = mf_fail(ctx, MF_ERR_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
    else {
        const ssize_t w = write(fd, text, len);
        const int err = errno;
        if (close(fd) != 0 || w != (ssize_t)len)
            st = mf_fail(ctx, MF_ERR_IO, "%s: cannot write %s: %s", fn, tmp,
                         strerror(w < 0 ? err : EIO));
        if (st == MF_OK && link(tmp, path) != 0) {
            if (errno == EEXIST)
                st = mf_fail(ctx, MF_ERR_IO,
                             "%s: the rendezvous file %s exists (left by an earlier launch? "
                             "remove it, or name another)",
                             fn, path);
            else
                st = mf_fail(ctx, MF_ERR_IO, "%s: cannot create the rendezvous file %s: %s", fn,
                             path, strerror(errno));
        }
        unlink(tmp);
    }
    free(tmp);
    return st;
}

/* The other ranks: wait for rank 0's id of this launch at path, up to `timeout` seconds. */
static mf_status await(mf_ctx *ctx, const char *path, const char *token, double timeout,
                       unsigned char id[MF_NCCL_ID_BYTES])
{
    static const char fn[] = "mf_ctx_join_launched";
    const double start = mf_seconds();
    int seen_other = 0;
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f) {
            char text[2 * MF_NCCL_ID_BYTES + TOKEN_CAP + 64];
            const size_t n = fread(text, 1, sizeof text - 1, f);
            fclose(f);
            text[n] = '\0';
            if (parse_rendezvous(text, token, id))
                return MF_OK;
            seen_other = 1;
        }
        if (mf_seconds() - start > timeout)
            return mf_fail(ctx, MF_ERR_IO, "%s: waited %.0f s for rank 0's NCCL id in %s%s", fn,
                           timeout, path,
                           seen_other ? " (the file there is of another launch)" : "");
        const struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

mf_status mf_nccl_make_id(mf_ctx *ctx, void *id, size_t bytes)
{
    static const char fn[] = "mf_nccl_make_id";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, id, "%s: id is NULL", fn);
    MF_REQUIRE(ctx, bytes >= MF_NCCL_ID_BYTES, "%s: %zu bytes, fewer than MF_NCCL_ID_BYTES (%d)",
               fn, bytes, MF_NCCL_ID_BYTES);
    if (ctx->backend != MF_BACKEND_CUDA)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED, "%s: a CPU context makes no NCCL id", fn);
    unsigned char made[MF_NCCL_ID_BYTES];
    MF_TRY(mf_nccl_unique_id(ctx, made));
    memset(id, 0, bytes);
    memcpy(id, made, sizeof made);
    return MF_OK;
}

mf_status mf_ctx_join_nccl_id(mf_ctx *ctx, const void *id, size_t bytes, int rank, int size)
{
    static const char fn[] = "mf_ctx_join_nccl_id";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, id, "%s: id is NULL", fn);
    MF_REQUIRE(ctx, bytes >= MF_NCCL_ID_BYTES, "%s: %zu bytes, fewer than MF_NCCL_ID_BYTES (%d)",
               fn, bytes, MF_NCCL_ID_BYTES);
    MF_REQUIRE(ctx, size >= 1 && rank >= 0 && rank < size, "%s: rank %d of %d is outside 0..%d", fn,
               rank, size, size - 1);
    MF_REQUIRE(ctx, !ctx->comm, "%s: the context is already in a group", fn);
    if (ctx->backend != MF_BACKEND_CUDA)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "%s: a CPU context joins its processes through MPI (mf_ctx_set_mpi_comm)",
                       fn);
    return mf_nccl_comm_init_rank(ctx, (const unsigned char *)id, rank, size, &ctx->comm);
}

mf_status mf_launch_share_id(mf_ctx *ctx, const char *path, int rank, double timeout_seconds,
                             unsigned char id[MF_NCCL_ID_BYTES])
{
    char token[TOKEN_CAP];
    launch_token(token, sizeof token);
    if (rank == 0)
        return publish(ctx, path, token, id);
    return await(ctx, path, token, timeout_seconds > 0 ? timeout_seconds : 300.0, id);
}

mf_status mf_ctx_join_launched(mf_ctx *ctx, const char *rendezvous, double timeout_seconds)
{
    static const char fn[] = "mf_ctx_join_launched";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, !ctx->comm, "%s: the context is already in a group", fn);
    MF_REQUIRE(ctx, !(timeout_seconds != timeout_seconds), "%s: timeout_seconds is NaN", fn);
    int rank, size;
    MF_TRY(mf_launch_detect(&rank, &size, NULL));
    if (size == 1)
        return MF_OK;
    if (ctx->backend != MF_BACKEND_CUDA)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "%s: a CPU context joins its processes through MPI (mf_ctx_set_mpi_comm)",
                       fn);
    const char *path = rendezvous ? rendezvous : getenv("MFACT_RENDEZVOUS");
    MF_REQUIRE(ctx, path && *path,
               "%s: rank %d of %d needs a rendezvous file that every rank sees (the argument, "
               "or MFACT_RENDEZVOUS)",
               fn, rank, size);
    unsigned char id[MF_NCCL_ID_BYTES];
    if (rank == 0)
        MF_TRY(mf_nccl_unique_id(ctx, id));
    MF_TRY(mf_launch_share_id(ctx, path, rank, timeout_seconds, id));
    mf_status st = mf_nccl_comm_init_rank(ctx, id, rank, size, &ctx->comm);
    /* Every rank read the file before its ncclCommInitRank, which returns once all joined. */
    if (rank == 0)
        unlink(path);
    return st;
}
