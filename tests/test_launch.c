/* Launched processes (mf_launch_detect, mf_ctx_join_launched): the launchers' variables, the
 * rendezvous file between two processes, and every refusal. The NCCL join itself needs
 * GPUs: tests/tool/check-launched.sh runs the CLI under torchrun on the device. */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/launch.h"
#include "testutil.h"

/* Every variable mf_launch_detect reads, cleared. */
static void clear_launch_env(void)
{
    static const char *const names[] = {"RANK",
                                        "WORLD_SIZE",
                                        "LOCAL_RANK",
                                        "OMPI_COMM_WORLD_RANK",
                                        "OMPI_COMM_WORLD_SIZE",
                                        "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "PMI_RANK",
                                        "PMI_SIZE",
                                        "MPI_LOCALRANKID",
                                        "SLURM_PROCID",
                                        "SLURM_STEP_NUM_TASKS",
                                        "SLURM_LOCALID",
                                        "SLURM_NTASKS",
                                        "MFACT_RUN_ID",
                                        "TORCHELASTIC_RUN_ID",
                                        "OMPI_MCA_ess_base_jobid",
                                        "PMIX_NAMESPACE",
                                        "SLURM_JOB_ID",
                                        "SLURM_STEP_ID",
                                        "MFACT_RENDEZVOUS"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        unsetenv(names[i]);
}

static void expect_detect(int rank, int size, int local)
{
    int r = -1, n = -1, l = -1;
    ck_assert_int_eq(mf_launch_detect(&r, &n, &l), MF_OK);
    ck_assert_int_eq(r, rank);
    ck_assert_int_eq(n, size);
    ck_assert_int_eq(l, local);
}

START_TEST(detect_reads_each_launcher)
{
    clear_launch_env();
    expect_detect(0, 1, 0); /* no launcher: one process */
    ck_assert_int_eq(mf_launch_detect(NULL, NULL, NULL), MF_OK);
    setenv("RANK", "3", 1), setenv("WORLD_SIZE", "8", 1), setenv("LOCAL_RANK", "1", 1);
    expect_detect(3, 8, 1); /* torchrun */
    clear_launch_env();
    setenv("OMPI_COMM_WORLD_RANK", "2", 1), setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    expect_detect(2, 3, 0); /* Open MPI */
    clear_launch_env();
    setenv("PMI_RANK", "1", 1), setenv("PMI_SIZE", "2", 1);
    expect_detect(1, 2, 1); /* MPICH without a local rank: the rank */
    clear_launch_env();
    /* A batch script's own step: SLURM_PROCID and SLURM_NTASKS, but no step of srun's. */
    setenv("SLURM_PROCID", "0", 1), setenv("SLURM_NTASKS", "4", 1);
    expect_detect(0, 1, 0);
    setenv("SLURM_STEP_NUM_TASKS", "4", 1), setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_LOCALID", "3", 1);
    expect_detect(3, 4, 3); /* srun */
    clear_launch_env();
}
END_TEST

START_TEST(detect_refuses_malformed_variables)
{
    static const char *const bad[][3] = {
        {"x", "2", "0"},  {"2", "2", "0"}, {"-1", "2", "0"},         {"0", "0", "0"},
        {"0", "2x", "0"}, {"0", "2", "y"}, {"1", "99999999999", "0"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        clear_launch_env();
        setenv("RANK", bad[i][0], 1), setenv("WORLD_SIZE", bad[i][1], 1);
        setenv("LOCAL_RANK", bad[i][2], 1);
        int r = 7;
        ck_assert_int_eq(mf_launch_detect(&r, NULL, NULL), MF_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(r, 7); /* outputs untouched */
        const char *msg = mf_ctx_last_error(NULL);
        ck_assert_msg(strstr(msg, "RANK") || strstr(msg, "WORLD_SIZE"), "message: %s", msg);
    }
    clear_launch_env();
}
END_TEST

START_TEST(join_refuses_what_it_cannot_do)
{
    clear_launch_env();
    ck_assert_int_eq(mf_ctx_join_launched(NULL, "/tmp/x", 0), MF_ERR_INVALID_ARGUMENT);
    mf_ctx *ctx = tu_cpu_ctx();
    /* One process: nothing to join. */
    ck_assert_int_eq(mf_ctx_join_launched(ctx, NULL, 0), MF_OK);
    int rank, size;
    ck_assert_int_eq(mf_ctx_rank(ctx, &rank, &size), MF_OK);
    ck_assert_int_eq(size, 1);
    /* Two processes, but a CPU context: MPI's business. */
    setenv("RANK", "0", 1), setenv("WORLD_SIZE", "2", 1);
    ck_assert_int_eq(mf_ctx_join_launched(ctx, "/tmp/x", 0), MF_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "mf_ctx_set_mpi_comm"));
    setenv("RANK", "zero", 1);
    ck_assert_int_eq(mf_ctx_join_launched(ctx, "/tmp/x", 0), MF_ERR_INVALID_ARGUMENT);
    /* the launcher's complaint is on the context, not only on the thread's slot */
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "mf_ctx_join_launched: "));
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "zero"));
    clear_launch_env();
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(nccl_id_calls_check_their_arguments)
{
    unsigned char id[MF_NCCL_ID_BYTES + 8];
    memset(id, 0x5a, sizeof id);
    ck_assert_int_eq(mf_nccl_make_id(NULL, id, sizeof id), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_join_nccl_id(NULL, id, sizeof id, 0, 2), MF_ERR_INVALID_ARGUMENT);
    mf_ctx *ctx = tu_cpu_ctx();
    ck_assert_int_eq(mf_nccl_make_id(ctx, NULL, sizeof id), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_nccl_make_id(ctx, id, MF_NCCL_ID_BYTES - 1), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_nccl_make_id(ctx, id, sizeof id), MF_ERR_UNSUPPORTED); /* CPU */
    for (size_t i = 0; i < sizeof id; i++)
        ck_assert_int_eq(id[i], 0x5a); /* untouched */
    ck_assert_int_eq(mf_ctx_join_nccl_id(ctx, NULL, sizeof id, 0, 2), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_join_nccl_id(ctx, id, 16, 0, 2), MF_ERR_INVALID_ARGUMENT);
    static const int bad[][2] = {{-1, 2}, {2, 2}, {0, 0}, {5, 3}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(mf_ctx_join_nccl_id(ctx, id, sizeof id, bad[i][0], bad[i][1]),
                         MF_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "rank"));
    }
    ck_assert_int_eq(mf_ctx_join_nccl_id(ctx, id, sizeof id, 0, 2), MF_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "mf_ctx_set_mpi_comm"));
    int rank, size;
    ck_assert_int_eq(mf_ctx_rank(ctx, &rank, &size), MF_OK);
    ck_assert_int_eq(size, 1); /* no group was made */
    mf_ctx_destroy(ctx);
}
END_TEST

/* A scratch path that does not exist yet. */
static void scratch_path(char *out, size_t cap, const char *what)
{
    snprintf(out, cap, "/tmp/mfact-test-%s.%ld", what, (long)getpid());
    unlink(out);
}

START_TEST(rendezvous_hands_the_id_to_another_process)
{
    clear_launch_env();
    setenv("MFACT_RUN_ID", "test-launch-1", 1);
    char path[128];
    scratch_path(path, sizeof path, "rdv");
    unsigned char id[MF_NCCL_ID_BYTES];
    for (int i = 0; i < MF_NCCL_ID_BYTES; i++)
        id[i] = (unsigned char)(i * 37 + 11);
    fflush(NULL);
    const pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) { /* rank 1: waits for the file, which comes later */
        mf_ctx *c = NULL;
        unsigned char got[MF_NCCL_ID_BYTES] = {0};
        int ok = mf_ctx_create(&c, NULL) == MF_OK &&
                 mf_launch_share_id(c, path, 1, 20.0, got) == MF_OK &&
                 memcmp(got, id, sizeof got) == 0;
        _exit(ok ? 0 : 1);
    }
    const struct timespec later = {0, 200 * 1000 * 1000};
    nanosleep(&later, NULL);
    mf_ctx *ctx = tu_cpu_ctx();
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 0, 0, id), MF_OK);
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* A second publish at the same path fails: the file of a crashed launch is named. */
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 0, 0, id), MF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), path));
    /* A rank of another launch never takes it: it times out, saying why. */
    setenv("MFACT_RUN_ID", "test-launch-2", 1);
    unsigned char got[MF_NCCL_ID_BYTES];
    memset(got, 0xab, sizeof got);
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 1, 0.2, got), MF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "another launch"));
    for (int i = 0; i < MF_NCCL_ID_BYTES; i++)
        ck_assert_int_eq(got[i], 0xab);
    unlink(path);
    /* No file at all: the wait ends. */
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 1, 0.1, got), MF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "waited"));
    /* A directory that does not exist: rank 0 cannot publish. */
    ck_assert_int_eq(mf_launch_share_id(ctx, "/nonexistent-dir/rdv", 0, 0, id), MF_ERR_IO);
    clear_launch_env();
    mf_ctx_destroy(ctx);
}
END_TEST

/* A rendezvous file written by hand: token, writer host and pid, an id of byte `fill`;
 * `mode` its permissions. */
static void write_rendezvous(const char *path, const char *token, long pid, int fill, mode_t mode)
{
    char host[256];
    ck_assert_int_eq(gethostname(host, sizeof host), 0);
    host[sizeof host - 1] = '\0';
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "mfact-rendezvous 2\n%s\n%s %ld\n", token, host, pid);
    for (int i = 0; i < MF_NCCL_ID_BYTES; i++)
        fprintf(f, "%02x", fill);
    fputc('\n', f);
    fclose(f);
    ck_assert_int_eq(chmod(path, mode), 0);
}

/* A pid that no process has: a child's, once it is reaped. */
static long dead_pid(void)
{
    const pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(child, NULL, 0), child);
    return (long)child;
}

START_TEST(rendezvous_files_that_are_not_this_launchs)
{
    clear_launch_env();
    setenv("MFACT_RUN_ID", "test-launch-3", 1);
    const char *token = "MFACT_RUN_ID=test-launch-3";
    char path[128];
    scratch_path(path, sizeof path, "stale");
    mf_ctx *ctx = tu_cpu_ctx();
    unsigned char id[MF_NCCL_ID_BYTES], got[MF_NCCL_ID_BYTES];
    memset(id, 0x42, sizeof id);
    /* Left by a crashed launch on this host (its writer is gone): a waiting rank does not
     * take it, and rank 0 replaces it. */
    write_rendezvous(path, token, dead_pid(), 0x17, 0600);
    memset(got, 0, sizeof got);
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 1, 0.2, got), MF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "a launch that is over"));
    ck_assert_int_eq(got[0], 0);
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 0, 0, id), MF_OK);
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 1, 5, got), MF_OK);
    ck_assert_int_eq(memcmp(got, id, sizeof id), 0);
    /* The file of a live writer is never replaced. */
    write_rendezvous(path, token, (long)getppid(), 0x18, 0600);
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 0, 0, id), MF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "exists"));
    /* One that others may read or write, or a FIFO: never read (a FIFO would block). */
    write_rendezvous(path, token, (long)getppid(), 0x19, 0644);
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 1, 0.2, got), MF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "private regular file"));
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    const double t0 = (double)time(NULL);
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 1, 0.3, got), MF_ERR_IO);
    ck_assert((double)time(NULL) - t0 < 10.0);
    unlink(path);
    /* Malformed text (odd hex, a short id, no writer line): never taken. */
    static const char *const bad[] = {"mfact-rendezvous 2\nMFACT_RUN_ID=test-launch-3\nh 1\nabc\n",
                                      "mfact-rendezvous 2\nMFACT_RUN_ID=test-launch-3\n0102\n",
                                      "mfact-rendezvous 1\nMFACT_RUN_ID=test-launch-3\n0102\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(bad[i], f);
        fclose(f);
        ck_assert_int_eq(mf_launch_share_id(ctx, path, 1, 0.1, got), MF_ERR_IO);
        unlink(path);
    }
    /* torchrun's default run id "none" names no launch. */
    clear_launch_env();
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    write_rendezvous(path, "", (long)getppid(), 0x21, 0600);
    ck_assert_int_eq(mf_launch_share_id(ctx, path, 1, 5, got), MF_OK);
    ck_assert_int_eq(got[0], 0x21);
    unlink(path);
    clear_launch_env();
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {"launch", false, false, 60, NULL, NULL};
    const TTest *tests[] = {detect_reads_each_launcher,
                            detect_refuses_malformed_variables,
                            join_refuses_what_it_cannot_do,
                            nccl_id_calls_check_their_arguments,
                            rendezvous_files_that_are_not_this_launchs,
                            rendezvous_hands_the_id_to_another_process};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
