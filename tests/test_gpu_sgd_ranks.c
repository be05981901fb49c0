/* Hogwild SGD over groups of CUDA contexts (mf_ctx_join_local over NCCL), where an epoch's
 * sub-steps are queued back to back with one loss read and one sum over the ranks an epoch,
 * and popular items get replicas within the sub-step they are updated in: on ratings with
 * two items every user rated, every rank the same factors, as good as one context's; a
 * rank's part failing in a sub-step fails every rank, none left waiting. Over one rank, and
 * over 2 to all devices of the machine. Without NCCL the suite says so and skips, unless
 * MFACT_REQUIRE_NCCL is set (scripts/device-test sets it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "als_fixtures.h"
#include "ranks_fixtures.h"
#include "sgd/sgd_internal.h" /* mf_sgd_debug_hot_items */
#include "sgd_fixtures.h"
#include "testutil.h"

#define USERS 4000
#define ITEMS 900

/* n ranks on devices 0..n-1, grouped, running SGD with options so on their own copy of the
 * fixture's 3% (popular 0) or of sx_popular's training ratings at 0.5% with items 0 and 1
 * rated by every user, measured on its test set (tests[i], the caller's to destroy). 0 (the
 * group closed again) where NCCL cannot be loaded and MFACT_REQUIRE_NCCL is not set. */
static int open_group(rk_job *jobs, int n, const mf_sgd_opts *so, int popular, mf_sparse **tests)
{
    mf_ctx *ctxs[8];
    for (int i = 0; i < n; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].sgd = 1, jobs[i].so = *so;
        jobs[i].ctx = ctxs[i] = rk_cuda_ctx(i);
        ck_assert_ptr_nonnull(ctxs[i]);
        if (popular) {
            sx_popular(ctxs[i], USERS, ITEMS, 0.005, 2, 9, &jobs[i].R, &tests[i]);
            jobs[i].so.test = tests[i];
        } else {
            jobs[i].R = ax_ratings(ctxs[i], USERS, ITEMS, 0.03, 9, NULL, NULL);
        }
        jobs[i].U = malloc((size_t)USERS * so->rank * sizeof(float));
        jobs[i].V = malloc((size_t)ITEMS * so->rank * sizeof(float));
    }
    const mf_status st = mf_ctx_join_local(ctxs, n);
    if (rk_nccl_missing(st, ctxs[0])) {
        for (int i = 0; popular && i < n; i++)
            mf_sparse_destroy(tests[i]);
        rk_close_group(jobs, n);
        return 0;
    }
    ck_assert_msg(st == MF_OK, "%s", mf_ctx_last_error(ctxs[0]));
    return 1;
}

/* SGD over n ranks on ratings with two items every user rated: the popular items get
 * replicas within their sub-step (mf_sgd_debug_hot_items), every rank returns the same
 * factors, and the test RMSE is one context's within 2% (Hogwild's order differs). A
 * replica spread or averaged around the wrong sub-step would leave an item's row stale or
 * overwrite it with an old one. */
static void check_sgd_hot_group(int n)
{
    mf_sgd_opts so;
    mf_sgd_opts_init(&so);
    so.rank = 32, so.epochs = 15, so.storage = MF_SGD_STORAGE_FP16;
    const size_t ub = (size_t)USERS * so.rank * sizeof(float),
                 vb = (size_t)ITEMS * so.rank * sizeof(float);
    mf_ctx *one = rk_cuda_ctx(0);
    mf_sparse *R1 = NULL, *T1 = NULL;
    sx_popular(one, USERS, ITEMS, 0.005, 2, 9, &R1, &T1);
    float *U1 = malloc(ub), *V1 = malloc(vb);
    mf_sgd_opts o1 = so;
    o1.test = T1;
    mf_sgd_report r1 = {.struct_size = sizeof r1};
    ck_assert_int_eq(mf_sgd_hogwild_run(one, R1, &o1, U1, V1, MF_MEMORY_HOST, &r1), MF_OK);
    const int64_t hot1 = mf_sgd_debug_hot_items;
    mf_sparse_destroy(R1);
    mf_sparse_destroy(T1);
    mf_ctx_destroy(one);
    rk_job jobs[8];
    mf_sparse *tests[8];
    if (open_group(jobs, n, &so, 1, tests)) {
        mf_sgd_debug_hot_items = -1;
        rk_run_als(jobs, n);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
            ck_assert(!memcmp(jobs[i].U, jobs[0].U, ub) && !memcmp(jobs[i].V, jobs[0].V, vb));
        }
        printf("SGD over %d rank(s), two items rated by all: test RMSE %.5f, one context "
               "%.5f; hot items %lld (one context %lld)\n",
               n, jobs[0].srep.test_rmse, r1.test_rmse, (long long)mf_sgd_debug_hot_items,
               (long long)hot1);
        ck_assert_int_ge(hot1, 1);
        ck_assert_int_ge(mf_sgd_debug_hot_items, 1);
        ck_assert_double_le(fabs(jobs[0].srep.test_rmse / r1.test_rmse - 1.0), 0.02);
        for (int i = 0; i < n; i++)
            mf_sparse_destroy(tests[i]);
        rk_close_group(jobs, n);
    }
    free(U1);
    free(V1);
}

/* A rank's part failing in a sub-step over NCCL (mf_sgd_debug_fail_*: rank 1, in the first
 * sub-step of the fit and in the middle of epoch 3): every rank returns, rank 1 with its
 * own error, the others with the group's. The sub-steps are queued without agreements in
 * between, so the failed rank must go on taking part in the broadcasts. */
static void check_sgd_failure(int n)
{
    const int64_t steps[] = {0, 2 * n + 1};
    for (int s = 0; s < 2; s++) {
        mf_sgd_opts so;
        mf_sgd_opts_init(&so);
        so.rank = 32, so.epochs = 5;
        rk_job jobs[8];
        if (!open_group(jobs, n, &so, 0, NULL))
            return;
        sx_run_failing(jobs, n, steps[s], "NCCL");
        printf("SGD over %d ranks, rank 1 failing at sub-step %lld: every rank failed\n", n,
               (long long)steps[s]);
        rk_close_group(jobs, n);
    }
}

START_TEST(one_rank)
{
    check_sgd_hot_group(1);
}
END_TEST

START_TEST(every_device)
{
    const int n = rk_device_count();
    if (n < 2) {
        printf("every_device: %d device(s), needs 2 or more: skipped\n", n);
        return;
    }
    for (int g = 2; g <= n; g++) {
        check_sgd_hot_group(g);
        check_sgd_failure(g);
    }
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_sgd_ranks", .gpu = true, .timeout = 300};
    const TTest *const tests[] = {one_rank, every_device};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
