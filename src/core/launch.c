/* One process per GPU: the caller's hand-over of rank 0's NCCL id (mf_nccl_make_id,
 * mf_ctx_join_nccl_id), or a launcher's start (mf_launch_detect, mf_ctx_join_launched): the
 * rank, size and local rank the launcher put in the environment, and the hand-over of the
 * id to the other ranks through a rendezvous file. The file is the only thing shared: NCCL
 * itself then connects the ranks (ncclCommInitRank), so mfact carries no transport of its
 * own. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* What names one launch, so that a rank does not take the id of another (a file left by a
 * crash): the launcher's job id where it gives a real one (torchrun's "none", its default,
 * is none), with the launcher's restart count (an elastic restart keeps its job id), else
 * MFACT_RUN_ID. Without one, a stale file is still recognised on its own host (its writer
 * is gone: see stale()). */
static void launch_token(char *out, size_t cap)
{
    static const char *const names[] = {"MFACT_RUN_ID", "TORCHELASTIC_RUN_ID",
                                        "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};
    static const char *const restarts[] = {"TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"};
    out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && *v && strcmp(v, "none") != 0) {
            snprintf(out, cap, "%s=%s", names[i], v);
            break;
        }
    }
    if (!out[0] && getenv("SLURM_JOB_ID"))
        snprintf(out, cap, "SLURM=%s.%s", getenv("SLURM_JOB_ID"),
                 getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : "");
    for (size_t i = 0; i < sizeof restarts / sizeof *restarts; i++) {
        const char *v = getenv(restarts[i]);
        const size_t n = strlen(out);
        if (v && *v && n + 1 < cap)
            snprintf(out + n, cap - n, " %s=%s", restarts[i], v);
    }
    /* A token is one line: anything unprintable would break the file's format. */
    for (char *p = out; *p; p++)
        if (*p < ' ' || *p > '~')
            *p = '_';
}

#define RENDEZVOUS_MAGIC "mfact-rendezvous 2"
#define TOKEN_CAP        256
#define HOST_CAP         256
#define TEXT_CAP         (2 * MF_NCCL_ID_BYTES + TOKEN_CAP + HOST_CAP + 96)

/* What a rendezvous file says. */
typedef struct rendezvous_file {
    char token[TOKEN_CAP];
    char host[HOST_CAP];
    long pid;
    unsigned char id[MF_NCCL_ID_BYTES];
} rendezvous_file;

static void this_host(char *out, size_t cap)
{
    if (gethostname(out, cap) != 0)
        snprintf(out, cap, "?");
    out[cap - 1] = '\0';
    for (char *p = out; *p; p++)
        if (*p <= ' ' || *p > '~')
            *p = '_';
}

/* The file's text: magic, token, writer ("host pid"), the id in hex, one line each. */
static size_t format_rendezvous(char *buf, size_t cap, const rendezvous_file *r)
{
    int n = snprintf(buf, cap, "%s\n%s\n%s %ld\n", RENDEZVOUS_MAGIC, r->token, r->host, r->pid);
    for (int i = 0; i < MF_NCCL_ID_BYTES && n > 0 && (size_t)n + 3 < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%02x", r->id[i]);
    if (n > 0 && (size_t)n + 1 < cap)
        buf[n++] = '\n';
    return n > 0 ? (size_t)n : 0;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* One line of text (up to '\n') copied into out (cap bytes); the text after it, or NULL
 * when there is no whole line or it does not fit. */
static const char *take_line(const char *text, char *out, size_t cap)
{
    const char *nl = strchr(text, '\n');
    if (!nl || (size_t)(nl - text) >= cap)
        return NULL;
    memcpy(out, text, (size_t)(nl - text));
    out[nl - text] = '\0';
    return nl + 1;
}

/* 1 when text is a whole rendezvous file (into *r), 0 when it is not (yet). */
static int parse_rendezvous(const char *text, rendezvous_file *r)
{
    char line[TEXT_CAP];
    if (!(text = take_line(text, line, sizeof line)) || strcmp(line, RENDEZVOUS_MAGIC) != 0)
        return 0;
    if (!(text = take_line(text, r->token, sizeof r->token)))
        return 0;
    if (!(text = take_line(text, line, sizeof line)))
        return 0;
    char *space = strrchr(line, ' ');
    if (!space || space == line || (size_t)(space - line) >= sizeof r->host)
        return 0;
    *space = '\0';
    memcpy(r->host, line, (size_t)(space - line) + 1); /* checked to fit, with its NUL */
    char *end;
    r->pid = strtol(space + 1, &end, 10);
    if (end == space + 1 || *end != '\0' || r->pid <= 0)
        return 0;
    for (int i = 0; i < MF_NCCL_ID_BYTES; i++) {
        const int hi = hex_digit(text[2 * i]), lo = hi < 0 ? -1 : hex_digit(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        r->id[i] = (unsigned char)(hi * 16 + lo);
    }
    return text[2 * MF_NCCL_ID_BYTES] == '\n';
}

/* A file left by a launch that is over: written on this host by a process that is gone. */
static int stale(const rendezvous_file *r)
{
    char host[HOST_CAP];
    this_host(host, sizeof host);
    return strcmp(host, r->host) == 0 && kill((pid_t)r->pid, 0) != 0 && errno == ESRCH;
}

/* The text of the file at path, read only when it is a regular file of this user's that
 * no one else may read or write (the path is shared: a FIFO would block the read, a file
 * another user planted would hand this rank a stranger's NCCL id). 1 read, 0 absent or not
 * such a file (*why says which), -1 a read error. */
static int read_private(const char *path, char *text, size_t cap, const char **why)
{
    const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = errno == ENOENT ? NULL : "cannot be opened";
        return 0;
    }
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    if (ok && (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))) {
        *why = "not a private regular file of this user's";
        close(fd);
        return 0;
    }
    size_t n = 0;
    ssize_t got = 0;
    while (ok && n + 1 < cap && (got = read(fd, text + n, cap - 1 - n)) > 0)
        n += (size_t)got;
    close(fd);
    text[n] = '\0';
    return ok && got >= 0 ? 1 : -1;
}

/* Rank 0: publish *r at path, exclusively (a file already there fails, unless it is a
 * stale one of this user's on this host) and whole (the text goes to a private file first
 * and takes the name by link(2), which never replaces a file; where the file system has no
 * hard links, the file is created exclusively and written in place: a reader takes only a
 * whole text). */
static mf_status publish(mf_ctx *ctx, const char *path, const rendezvous_file *r)
{
    static const char fn[] = "mf_ctx_join_launched";
    char text[TEXT_CAP];
    const size_t len = format_rendezvous(text, sizeof text, r);
    char *tmp = malloc(strlen(path) + 32);
    if (!tmp)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    snprintf(tmp, strlen(path) + 32, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    mf_status st = MF_OK;
    if (fd < 0)
        st = mf_fail(ctx, MF_ERR_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
    else {
        const ssize_t w = write(fd, text, len);
        const int err = errno;
        if (close(fd) != 0 || w != (ssize_t)len)
            st = mf_fail(ctx, MF_ERR_IO, "%s: cannot write %s: %s", fn, tmp,
                         strerror(w < 0 ? err : EIO));
    }
    for (int attempt = 0; st == MF_OK && attempt < 2; attempt++) {
        if (link(tmp, path) == 0)
            break;
        if (errno == EPERM || errno == EOPNOTSUPP || errno == ENOSYS || errno == EXDEV) {
            /* No hard links here: the name itself, created exclusively. */
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd >= 0) {
                const ssize_t w = write(fd, text, len);
                if (close(fd) != 0 || w != (ssize_t)len)
                    st = mf_fail(ctx, MF_ERR_IO, "%s: cannot write %s", fn, path);
                break;
            }
        }
        if (errno != EEXIST) {
            st = mf_fail(ctx, MF_ERR_IO, "%s: cannot create the rendezvous file %s: %s", fn, path,
                         strerror(errno));
            break;
        }
        char old_text[TEXT_CAP];
        const char *why = NULL;
        rendezvous_file old;
        if (attempt == 0 && read_private(path, old_text, sizeof old_text, &why) == 1 &&
            parse_rendezvous(old_text, &old) && stale(&old) && unlink(path) == 0)
            continue; /* a crashed launch's: gone, and the link is tried again */
        st = mf_fail(ctx, MF_ERR_IO,
                     "%s: the rendezvous file %s exists (a launch under way, or one that "
                     "crashed on another host: remove it, or name another)",
                     fn, path);
    }
    unlink(tmp);
    free(tmp);
    return st;
}

/* The other ranks: wait for rank 0's id of this launch at path, up to `timeout` seconds: a
 * whole file of this launch's token whose writer, on this host, is alive. */
static mf_status await(mf_ctx *ctx, const char *path, const char *token, double timeout,
                       unsigned char id[MF_NCCL_ID_BYTES])
{
    static const char fn[] = "mf_ctx_join_launched";
    const double start = mf_seconds();
    const char *seen = NULL;
    for (;;) {
        char text[TEXT_CAP];
        const char *why = NULL;
        const int got = read_private(path, text, sizeof text, &why);
        rendezvous_file r;
        if (got == 1 && parse_rendezvous(text, &r)) {
            if (strcmp(r.token, token) != 0)
                seen = "the file there is of another launch";
            else if (stale(&r))
                seen = "the file there was left by a launch that is over";
            else {
                memcpy(id, r.id, MF_NCCL_ID_BYTES);
                return MF_OK;
            }
        } else if (why)
            seen = why;
        if (mf_seconds() - start > timeout)
            return mf_fail(ctx, MF_ERR_IO, "%s: waited %.0f s for rank 0's NCCL id in %s%s%s", fn,
                           timeout, path, seen ? ": " : "", seen ? seen : "");
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
    mf_comm *made = NULL;
    const mf_status st = mf_nccl_comm_init_rank(ctx, (const unsigned char *)id, rank, size, &made);
    return mf_ranks_attach(ctx, st, made);
}

mf_status mf_launch_share_id(mf_ctx *ctx, const char *path, int rank, double timeout_seconds,
                             unsigned char id[MF_NCCL_ID_BYTES])
{
    rendezvous_file r;
    launch_token(r.token, sizeof r.token);
    if (rank != 0)
        return await(ctx, path, r.token, timeout_seconds > 0 ? timeout_seconds : 300.0, id);
    this_host(r.host, sizeof r.host);
    r.pid = (long)getpid();
    memcpy(r.id, id, MF_NCCL_ID_BYTES);
    return publish(ctx, path, &r);
}

mf_status mf_ctx_join_launched(mf_ctx *ctx, const char *rendezvous, double timeout_seconds)
{
    static const char fn[] = "mf_ctx_join_launched";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, !ctx->comm, "%s: the context is already in a group", fn);
    MF_REQUIRE(ctx, !(timeout_seconds != timeout_seconds), "%s: timeout_seconds is NaN", fn);
    int rank, size;
    /* mf_launch_detect has no context: its message is the thread's, moved onto ctx */
    mf_status st = mf_launch_detect(&rank, &size, NULL);
    if (st != MF_OK)
        return mf_fail(ctx, st, "%s: %s", fn, mf_ctx_last_error(NULL));
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
    mf_comm *made = NULL;
    st = mf_nccl_comm_init_rank(ctx, id, rank, size, &made);
    st = mf_ranks_attach(ctx, st, made);
    /* Every rank read the file before its ncclCommInitRank, which returns once all joined. */
    if (rank == 0)
        unlink(path);
    return st;
}
