/* Hogwild SGD over a group of CPU contexts (mf_ctx_join_local, the in-process exchange), where
 * an epoch's sub-steps follow each other with one agreement and one loss sum per epoch: a
 * rank whose part fails in any sub-step fails every rank (none left waiting), a divergence
 * stops every rank, a cancel on one rank without callbacks on the others stops them all at
 * the same epoch, and every rank still returns the same factors; the exchange's ring step
 * that carries the item blocks. test_ranks has the group's fit against one context's. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "als_fixtures.h"
#include "core/ctx.h" /* ctx->comm: the exchange's ring step */
#include "ranks_fixtures.h"
#include "sgd_fixtures.h"
#include "testutil.h"

#define USERS 300
#define ITEMS 120
#define RANK  4

/* n CPU contexts with the same seed, grouped, each with its own copy of planted ratings and
 * the options so. */
static void sgd_group(rk_job *jobs, int n, const mf_sgd_opts *so)
{
    mf_ctx *ctxs[8] = {NULL};
    for (int i = 0; i < n; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].ctx = ctxs[i] = tu_cpu_ctx_seeded(42);
        jobs[i].R = ax_planted(jobs[i].ctx, USERS, ITEMS, RANK, 0.15, 3);
        jobs[i].sgd = 1, jobs[i].so = *so;
        jobs[i].U = malloc((size_t)USERS * so->rank * sizeof(float));
        jobs[i].V = malloc((size_t)ITEMS * so->rank * sizeof(float));
        ck_assert(jobs[i].U && jobs[i].V);
    }
    ck_assert_int_eq(mf_ctx_join_local(ctxs, n), MF_OK);
}

static int never_cancel(void *user, const mf_progress *p)
{
    (void)user;
    (void)p;
    return 0;
}

static int cancel_on_third(void *user, const mf_progress *p)
{
    (void)user;
    return p->iteration >= 3;
}

/* Rank 1 fails its part in the first sub-step of the fit, in the last of an epoch, and
 * in the middle of a later one; with and without a progress callback on rank 0 (which
 * makes the users travel after every epoch). Every rank returns: rank 1 its own error, the
 * others the group's. */
START_TEST(a_failed_sub_step_fails_every_rank)
{
    for (int n = 2; n <= 3; n++)
        for (int callback = 0; callback < 2; callback++) {
            const int64_t steps[] = {0, n - 1, 2 * n + 1};
            for (int s = 0; s < 3; s++) {
                mf_sgd_opts so;
                mf_sgd_opts_init(&so);
                so.rank = RANK, so.epochs = 5;
                rk_job jobs[3];
                sgd_group(jobs, n, &so);
                if (callback)
                    jobs[0].so.progress = never_cancel;
                sx_run_failing(jobs, n, steps[s], callback ? "CPU, a callback on rank 0" : "CPU");
                rk_close_group(jobs, n);
            }
        }
}
END_TEST

/* A learning rate that overflows the factors: the group's loss, summed once an epoch, is
 * the same on every rank, so all of them stop with the divergence, none waits. */
START_TEST(a_diverged_group_stops_together)
{
    mf_sgd_opts so;
    mf_sgd_opts_init(&so);
    so.rank = RANK, so.epochs = 30, so.learning_rate = 50.0f,
    so.schedule = MF_SGD_SCHEDULE_CONSTANT;
    so.lambda_u = so.lambda_v = so.lambda_bias = 0.0f;
    rk_job jobs[3];
    sgd_group(jobs, 3, &so);
    rk_run_als(jobs, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_NUMERIC);
        ck_assert_msg(strstr(jobs[i].error, "diverged in epoch"), "%s", jobs[i].error);
        ck_assert_str_eq(jobs[i].error, jobs[0].error); /* the same epoch and sum */
    }
    rk_close_group(jobs, 3);
}
END_TEST

/* One rank's progress callback cancels after the third epoch, the others have none: every
 * rank stops there with the epochs it finished, the same factors on each. Then the same
 * fit without any callback (the epochs agree on nothing but the loss) runs to its end, one
 * worker a rank repeating itself bit for bit. */
START_TEST(cancel_and_plain_runs)
{
    mf_sgd_opts so;
    mf_sgd_opts_init(&so);
    so.rank = RANK, so.epochs = 8, so.workers = 1;
    rk_job jobs[3];
    sgd_group(jobs, 3, &so);
    jobs[2].so.progress = cancel_on_third;
    rk_run_als(jobs, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(jobs[i].st == MF_ERR_CANCELLED, "rank %d: %s", i, jobs[i].error);
        ck_assert_int_eq(jobs[i].srep.epochs, 3);
        ck_assert(!memcmp(jobs[i].U, jobs[0].U, (size_t)USERS * RANK * sizeof(float)));
        ck_assert(!memcmp(jobs[i].V, jobs[0].V, (size_t)ITEMS * RANK * sizeof(float)));
    }
    rk_close_group(jobs, 3);

    rk_job a[3], b[3];
    sgd_group(a, 3, &so);
    rk_run_als(a, 3);
    sgd_group(b, 3, &so);
    rk_run_als(b, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(a[i].st == MF_OK, "rank %d: %s", i, a[i].error);
        ck_assert_int_eq(a[i].srep.epochs, so.epochs);
        ck_assert(a[i].srep.train_rmse == a[0].srep.train_rmse);
        ck_assert(!memcmp(a[i].U, b[i].U, (size_t)USERS * RANK * sizeof(float)));
        ck_assert(!memcmp(a[i].V, a[0].V, (size_t)ITEMS * RANK * sizeof(float)));
    }
    /* as good as one context's fit */
    mf_ctx *one = tu_cpu_ctx_seeded(42);
    mf_sparse *R = ax_planted(one, USERS, ITEMS, RANK, 0.15, 3);
    float *U1 = malloc((size_t)USERS * RANK * sizeof *U1), *V1 = malloc((size_t)ITEMS * RANK * 4);
    mf_sgd_report r1 = {.struct_size = sizeof r1};
    ck_assert_int_eq(mf_sgd_hogwild_run(one, R, &so, U1, V1, MF_MEMORY_HOST, &r1), MF_OK);
    printf("sgd over 3 ranks: train RMSE %.5f, one context %.5f\n", a[0].srep.train_rmse,
           r1.train_rmse);
    ck_assert_double_le(a[0].srep.train_rmse, r1.train_rmse * 1.10 + 1e-3);
    free(U1);
    free(V1);
    mf_sparse_destroy(R);
    mf_ctx_destroy(one);
    rk_close_group(a, 3);
    rk_close_group(b, 3);
}
END_TEST

/* The exchange's ring step (mf_comm_ops.shift) on the in-process stand-in, which SGD's
 * item blocks travel by: over 2 to 4 ranks, blocks of 3, 0 (empty), 5 and 2 rows of 12
 * bytes, each rank sending block (r + q) mod n and receiving (r + q + 1) mod n, gets rank
 * r + 1's block there and keeps every other row as it was. */
typedef struct shift_job {
    mf_ctx *ctx;
    int q;
    char buf[12 * 10];
    mf_status st;
} shift_job;

static const int64_t shift_bounds[][5] = {{0, 3, 10}, {0, 3, 3, 10}, {0, 3, 3, 8, 10}};

static void *run_shift(void *arg)
{
    shift_job *j = arg;
    const mf_comm *c = j->ctx->comm;
    j->st = c->ops->shift((mf_comm *)c, j->ctx, j->buf, shift_bounds[c->size - 2], 12,
                          (c->rank + j->q) % c->size, (c->rank + j->q + 1) % c->size);
    return NULL;
}

START_TEST(ring_step_of_the_exchange)
{
    for (int n = 2; n <= 4; n++)
        for (int q = 0; q < n; q++) {
            shift_job jobs[4];
            mf_ctx *ctxs[4];
            pthread_t threads[4];
            for (int r = 0; r < n; r++) {
                jobs[r].ctx = ctxs[r] = tu_cpu_ctx();
                jobs[r].q = q;
                for (int b = 0; b < 12 * 10; b++)
                    jobs[r].buf[b] = (char)(r * 16 + b % 7);
            }
            ck_assert_int_eq(mf_ctx_join_local(ctxs, n), MF_OK);
            for (int r = 0; r < n; r++)
                ck_assert_int_eq(pthread_create(&threads[r], NULL, run_shift, &jobs[r]), 0);
            for (int r = 0; r < n; r++)
                ck_assert_int_eq(pthread_join(threads[r], NULL), 0);
            const int64_t *bounds = shift_bounds[n - 2];
            for (int r = 0; r < n; r++) {
                ck_assert_int_eq(jobs[r].st, MF_OK);
                const int recv = (r + q + 1) % n, from = (r + 1) % n;
                for (int b = 0; b < 12 * 10; b++) {
                    const int in = b >= 12 * bounds[recv] && b < 12 * bounds[recv + 1];
                    ck_assert_msg(jobs[r].buf[b] == (char)((in ? from : r) * 16 + b % 7),
                                  "%d ranks, step %d, rank %d, byte %d", n, q, r, b);
                }
            }
            for (int r = 0; r < n; r++)
                mf_ctx_destroy(ctxs[r]);
        }
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "sgd_ranks", .timeout = 300};
    const TTest *const tests[] = {a_failed_sub_step_fails_every_rank,
                                  a_diverged_group_stops_together, cancel_and_plain_runs,
                                  ring_step_of_the_exchange};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
