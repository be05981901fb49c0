/* Launched processes (mf_launch_detect, mf_ctx_join_launched): the launchers' variables, the
 * rendezvous file between two processes, and every refusal. The NCCL join itself needs
 * GPUs: tests/tool/check-launched.sh runs the CLI under torchrun on the device. */
#define _POSIX_C_SOURCE 200809L
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

int main(void)
{
    static const tu_suite suite = {"launch", false, false, 60, NULL, NULL};
    const TTest *tests[] = {detect_reads_each_launcher, detect_refuses_malformed_variables,
                            join_refuses_what_it_cannot_do, nccl_id_calls_check_their_arguments,
                            rendezvous_hands_the_id_to_another_process};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
